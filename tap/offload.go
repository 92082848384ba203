package tap

import "golang.org/x/sys/unix"

// Offload flags for SetOffload (TUNSETOFFLOAD, linux/if_tun.h TUN_F_*):
// what the kernel may hand the reader in frames read from the tap. Which
// of them a guest accepts is the virtio-net device's business
// (virtio/net offloadFlags), beside the feature bits it negotiates.
const (
	OffloadCsum   uint = unix.TUN_F_CSUM    // partially checksummed frames
	OffloadTSO4   uint = unix.TUN_F_TSO4    // TCPv4 segmentation
	OffloadTSO6   uint = unix.TUN_F_TSO6    // TCPv6 segmentation
	OffloadTSOECN uint = unix.TUN_F_TSO_ECN // TSO frames with ECN
	OffloadUFO    uint = unix.TUN_F_UFO     // UDP fragmentation
)

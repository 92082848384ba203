package vmm

import (
	"hash/fnv"
	"net/netip"

	virtionet "github.com/govm/govm/virtio/net"
)

// NetMode is the kind of network a VM gets.
type NetMode int

// Network modes (--net).
const (
	NetNone NetMode = iota // no network device
	NetTap                 // virtio-net over a tap
)

// NetConfig is one network device the user asked for (--net, parsed by the
// CLI).
type NetConfig struct {
	Mode   NetMode
	IfName string        // tap to use; "" = create one named after the VM
	HostIP netip.Prefix  // for the host side; the zero Prefix: none
	MAC    virtionet.MAC // zero = DefaultMAC
	// Withhold lists feature bits not offered (FeatureSwitch).
	Withhold uint64
}

// DefaultMAC is a stable MAC for a VM without mac=: 52:54:00 (locally
// administered, unicast; the prefix QEMU uses, so tools recognise a VM NIC)
// then three bytes of a hash of the VM name.
func DefaultMAC(vmName string) virtionet.MAC {
	h := fnv.New32a()
	h.Write([]byte(vmName))
	v := h.Sum32()
	return virtionet.MAC{0x52, 0x54, 0x00, byte(v >> 16), byte(v >> 8), byte(v)}
}

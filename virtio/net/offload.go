package virtionet

import (
	"golang.org/x/sys/unix"

	"github.com/govm/govm/virtio"
)

// offloadFlags maps the negotiated guest features (spec 5.1.3) to the
// backend's TUNSETOFFLOAD flags (linux/if_tun.h TUN_F_*, Backend.SetOffload): what the kernel may hand us (and so the guest) in
// frames read from the tap. Without them it must checksum and segment
// everything itself. Host (device-side) offloads do not appear: they
// concern frames the guest sends.
//
// The kernel's tun set_offload accepts TSO/ECN/UFO only together with
// TUN_F_CSUM (a partially checksummed segment is meaningless otherwise) and
// rejects the whole call with EINVAL for flags it did not consume, so they
// are only set when GUEST_CSUM was negotiated; spec 5.1.3.1 likewise makes
// GUEST_TSO4/6/UFO/ECN depend on GUEST_CSUM.
func offloadFlags(features uint64) uint {
	has := func(bit uint) bool { return features&virtio.Bit(bit) != 0 }
	if !has(FeatureGuestCsum) {
		return 0
	}
	flags := uint(unix.TUN_F_CSUM)
	if has(FeatureGuestTSO4) {
		flags |= unix.TUN_F_TSO4
	}
	if has(FeatureGuestTSO6) {
		flags |= unix.TUN_F_TSO6
	}
	// ECN (spec 5.1.3.1: GUEST_ECN requires GUEST_TSO4 or GUEST_TSO6)
	// only qualifies TSO, so the kernel ignores it without TSO.
	if has(FeatureGuestECN) && flags&(unix.TUN_F_TSO4|unix.TUN_F_TSO6) != 0 {
		flags |= unix.TUN_F_TSO_ECN
	}
	if has(FeatureGuestUFO) {
		flags |= unix.TUN_F_UFO
	}
	return flags
}

package tap

import "golang.org/x/sys/unix"

// virtio-net feature bits the offload mapping reads (virtio spec 5.1.3).
// They are repeated here, rather than imported from virtio/net, so that tap
// stays a leaf package.
const (
	featGuestCsum = 1  // VIRTIO_NET_F_GUEST_CSUM
	featGuestTSO4 = 7  // VIRTIO_NET_F_GUEST_TSO4
	featGuestTSO6 = 8  // VIRTIO_NET_F_GUEST_TSO6
	featGuestECN  = 9  // VIRTIO_NET_F_GUEST_ECN
	featGuestUFO  = 10 // VIRTIO_NET_F_GUEST_UFO
)

// OffloadFlags maps the negotiated guest features to TUNSETOFFLOAD flags:
// what the kernel may hand us (and so the guest) in frames read from the
// tap. Without them it must checksum and segment everything itself.
//
// The kernel's tun set_offload accepts TSO/ECN/UFO only together with
// TUN_F_CSUM (a partially checksummed segment is meaningless otherwise) and
// rejects the whole call with EINVAL for flags it did not consume, so they
// are only set when GUEST_CSUM was negotiated; spec 5.1.3.1 likewise makes
// GUEST_TSO4/6/UFO/ECN depend on GUEST_CSUM.
func OffloadFlags(guestFeatures uint64) uint {
	has := func(bit uint) bool { return guestFeatures&(1<<bit) != 0 }
	if !has(featGuestCsum) {
		return 0
	}
	flags := uint(unix.TUN_F_CSUM)
	if has(featGuestTSO4) {
		flags |= unix.TUN_F_TSO4
	}
	if has(featGuestTSO6) {
		flags |= unix.TUN_F_TSO6
	}
	// ECN (spec 5.1.3.1: GUEST_ECN requires GUEST_TSO4 or GUEST_TSO6)
	// only qualifies TSO, so the kernel ignores it without TSO.
	if has(featGuestECN) && flags&(unix.TUN_F_TSO4|unix.TUN_F_TSO6) != 0 {
		flags |= unix.TUN_F_TSO_ECN
	}
	if has(featGuestUFO) {
		flags |= unix.TUN_F_UFO
	}
	return flags
}

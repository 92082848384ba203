package tap

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// linkExists reports whether an interface of that name exists in the
// current network namespace.
func linkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// configure assigns the host address (if any) and brings the link up, over
// rtnetlink: govm never shells out to ip(8).
func configure(name string, prefix *netip.Prefix) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("tap: %s: %w", name, err)
	}
	if prefix != nil {
		addr := &netlink.Addr{IPNet: &net.IPNet{
			IP:   net.IP(prefix.Addr().AsSlice()),
			Mask: net.CIDRMask(prefix.Bits(), prefix.Addr().BitLen()),
		}}
		// EEXIST: a pre-existing tap that already has the address.
		if err := netlink.AddrAdd(link, addr); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("tap: add address %s to %s: %w", prefix, name, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("tap: bring %s up: %w", name, err)
	}
	return nil
}

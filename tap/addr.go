package tap

import (
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"strings"
)

// ifNameMax is IFNAMSIZ-1: the kernel's limit on interface names.
const ifNameMax = 15

// NameForVM is the name of the tap govm creates for a VM's NIC nic
// (counting from 0): "govm-" and the VM name with characters the kernel
// rejects replaced; NICs after the first add "-N", so the taps of one VM
// never share a name. A name too long for the kernel's 15 bytes is cut and
// given 4 hex digits of a hash of the whole VM name before the "-N": cut
// alone, names that differ only at the end (the default guest-PID) would
// collide. Without a VM name the kernel picks a free "govmN".
func NameForVM(vm string, nic int) string {
	if vm == "" {
		return "govm%d"
	}
	suffix := ""
	if nic > 0 {
		suffix = fmt.Sprintf("-%d", nic)
	}
	var b strings.Builder
	b.WriteString("govm-")
	for _, r := range vm {
		if r > ' ' && r < 0x7f && r != '/' && r != ':' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name)+len(suffix) > ifNameMax {
		h := fnv.New32a()
		h.Write([]byte(vm))
		name = fmt.Sprintf("%s%04x", name[:ifNameMax-len(suffix)-4], h.Sum32()&0xffff)
	}
	return name + suffix
}

// ValidName checks an interface name the way the kernel's dev_valid_name
// does: 1..15 bytes, not "." or "..", no '/', ':' or whitespace.
func ValidName(name string) error {
	if name == "" || len(name) > ifNameMax || name == "." || name == ".." {
		return fmt.Errorf("%w %q: must be 1 to %d characters", ErrBadName, name, ifNameMax)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == '/' || c == ':' {
			return fmt.Errorf("%w %q: character %q not allowed", ErrBadName, name, c)
		}
	}
	return nil
}

// ParseMAC parses a colon- or hyphen-separated 6-byte MAC for a guest NIC:
// it must be unicast (bit 0 of the first byte clear, IEEE 802-2014 8.2)
// and not all zero.
func ParseMAC(s string) (net.HardwareAddr, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return nil, fmt.Errorf("%w %q: want 6 bytes like 52:54:00:12:34:56", ErrBadMAC, s)
	}
	if hw[0]&1 != 0 {
		return nil, fmt.Errorf("%w %q: multicast (low bit of the first byte set)", ErrBadMAC, s)
	}
	if string(hw) == "\x00\x00\x00\x00\x00\x00" {
		return nil, fmt.Errorf("%w %q: all zero", ErrBadMAC, s)
	}
	return hw, nil
}

// hostAddr is a parsed ADDR/PREFIX.
type hostAddr = netip.Prefix

// ParseHostIP parses "ADDR/PREFIX" (IPv4 or IPv6) for the host side of a
// tap. The address must be a usable unicast one, not a network's zero
// address with the host bits all clear (e.g. 10.0.0.0/24).
func ParseHostIP(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w %q: want ADDR/PREFIX like 10.0.2.1/24", ErrBadAddr, s)
	}
	a := p.Addr()
	if a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || (a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
		return netip.Prefix{}, fmt.Errorf("%w %q: not a unicast address", ErrBadAddr, s)
	}
	if p.Bits() < p.Addr().BitLen() && p.Masked().Addr() == a {
		return netip.Prefix{}, fmt.Errorf("%w %q: the network address itself, not a host in it", ErrBadAddr, s)
	}
	return p, nil
}

package tap

import (
	"fmt"
	"hash/fnv"
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

// ParseHostIP parses "ADDR/PREFIX" (IPv4 or IPv6) for the host side of a
// tap and checks it (CheckHostIP).
func ParseHostIP(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w %q: want ADDR/PREFIX like 10.0.2.1/24", ErrBadAddr, s)
	}
	if err := CheckHostIP(p); err != nil {
		return netip.Prefix{}, err
	}
	return p, nil
}

// CheckHostIP says why p cannot be the host side's address: not a usable
// unicast one, or a network's zero address with the host bits all clear
// (e.g. 10.0.0.0/24). nil when it can.
func CheckHostIP(p netip.Prefix) error {
	if !p.IsValid() {
		return fmt.Errorf("%w %q: want ADDR/PREFIX like 10.0.2.1/24", ErrBadAddr, p)
	}
	a := p.Addr()
	if a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || (a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
		return fmt.Errorf("%w %q: not a unicast address", ErrBadAddr, p)
	}
	if p.Bits() < p.Addr().BitLen() && p.Masked().Addr() == a {
		return fmt.Errorf("%w %q: the network address itself, not a host in it", ErrBadAddr, p)
	}
	return nil
}

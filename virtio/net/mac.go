package virtionet

import (
	"errors"
	"fmt"
	"net"
)

// MAC is the device's Ethernet address, the config space's mac field
// (spec 5.1.4).
type MAC [6]byte

// ErrBadMAC: a MAC address the device cannot have.
var ErrBadMAC = errors.New("virtionet: bad MAC address")

// ParseMAC parses a colon- or hyphen-separated 6-byte MAC and checks it
// (Check).
func ParseMAC(s string) (MAC, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return MAC{}, fmt.Errorf("%w %q: want 6 bytes like 52:54:00:12:34:56", ErrBadMAC, s)
	}
	m := MAC(hw)
	if err := m.Check(); err != nil {
		return MAC{}, err
	}
	return m, nil
}

// Check says why m cannot be a NIC's own address: a multicast one (bit 0
// of the first byte set, IEEE 802-2014 8.2) or all zero. nil when it can.
func (m MAC) Check() error {
	if m[0]&1 != 0 {
		return fmt.Errorf("%w %q: multicast (low bit of the first byte set)", ErrBadMAC, m)
	}
	if m == (MAC{}) {
		return fmt.Errorf("%w %q: all zero", ErrBadMAC, m)
	}
	return nil
}

// String is the colon-separated form, as ip link shows it.
func (m MAC) String() string { return net.HardwareAddr(m[:]).String() }

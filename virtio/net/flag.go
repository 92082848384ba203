package virtionet

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strings"

	"github.com/govm/govm/tap"
)

// ErrNetFlag: a --net value govm does not understand.
var ErrNetFlag = errors.New("virtionet: bad --net value")

// NetMode is the kind of network a VM gets.
type NetMode int

// Network modes of --net.
const (
	NetNone NetMode = iota // no network device
	NetTap                 // virtio-net over a tap
)

// NetConfig is a parsed --net flag.
type NetConfig struct {
	Mode   NetMode
	IfName string           // tap to use; "" = create one named after the VM
	HostIP string           // "ADDR/PREFIX" for the host side, or ""
	MAC    net.HardwareAddr // nil = DefaultMAC
}

// ParseNetFlag parses "none" or "tap[,ifname=NAME][,host-ip=ADDR/PREFIX]
// [,mac=MAC]". Every error is one line naming the bad part.
func ParseNetFlag(s string) (NetConfig, error) {
	parts := strings.Split(s, ",")
	switch parts[0] {
	case "none":
		if len(parts) > 1 {
			return NetConfig{}, fmt.Errorf("%w %q: none takes no options", ErrNetFlag, s)
		}
		return NetConfig{Mode: NetNone}, nil
	case "tap":
	default:
		return NetConfig{}, fmt.Errorf("%w %q: want none or tap[,ifname=NAME][,host-ip=ADDR/PREFIX][,mac=MAC]", ErrNetFlag, s)
	}
	cfg := NetConfig{Mode: NetTap}
	seen := map[string]bool{}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok || v == "" {
			return NetConfig{}, fmt.Errorf("%w %q: option %q is not key=value", ErrNetFlag, s, p)
		}
		if seen[k] {
			return NetConfig{}, fmt.Errorf("%w %q: %s given twice", ErrNetFlag, s, k)
		}
		seen[k] = true
		var err error
		switch k {
		case "ifname":
			err = tap.ValidName(v)
			cfg.IfName = v
		case "host-ip":
			_, err = tap.ParseHostIP(v)
			cfg.HostIP = v
		case "mac":
			cfg.MAC, err = tap.ParseMAC(v)
		default:
			return NetConfig{}, fmt.Errorf("%w %q: unknown option %q (want ifname, host-ip or mac)", ErrNetFlag, s, k)
		}
		if err != nil {
			return NetConfig{}, fmt.Errorf("%w: %w", ErrNetFlag, err)
		}
	}
	return cfg, nil
}

// DefaultMAC is a stable MAC for a VM without mac=: 52:54:00 (locally
// administered, unicast; the prefix QEMU uses, so tools recognise a VM NIC)
// then three bytes of a hash of the VM name.
func DefaultMAC(vmName string) net.HardwareAddr {
	h := fnv.New32a()
	h.Write([]byte(vmName))
	v := h.Sum32()
	return net.HardwareAddr{0x52, 0x54, 0x00, byte(v >> 16), byte(v >> 8), byte(v)}
}

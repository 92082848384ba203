package main

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/govm/govm/virtio"
	virtionet "github.com/govm/govm/virtio/net"
	"github.com/govm/govm/vmm"
)

func TestParseNet(t *testing.T) {
	tests := []struct {
		in   string
		want vmm.NetConfig
		err  string // substring of the error; "" = success
	}{
		{"none", vmm.NetConfig{Mode: vmm.NetNone}, ""},
		{"tap", vmm.NetConfig{Mode: vmm.NetTap}, ""},
		{"tap,ifname=tap0", vmm.NetConfig{Mode: vmm.NetTap, IfName: "tap0"}, ""},
		{"tap,host-ip=10.0.2.1/24,mac=52:54:00:aa:bb:cc,ifname=t1",
			vmm.NetConfig{Mode: vmm.NetTap, IfName: "t1", HostIP: netip.MustParsePrefix("10.0.2.1/24"), MAC: virtionet.MAC{0x52, 0x54, 0, 0xaa, 0xbb, 0xcc}}, ""},
		{"", vmm.NetConfig{}, "want none or tap"},
		{"user", vmm.NetConfig{}, "want none or tap"},
		{"none,ifname=x", vmm.NetConfig{}, "none takes no options"},
		{"tap,", vmm.NetConfig{}, "not key=value"},
		{"tap,ifname", vmm.NetConfig{}, "not key=value"},
		{"tap,ifname=", vmm.NetConfig{}, "not key=value"},
		{"tap,ifname=a,ifname=b", vmm.NetConfig{}, "ifname given twice"},
		{"tap,bridge=br0", vmm.NetConfig{}, `unknown option "bridge"`},
		{"tap,ifname=waytoolonginterfacename", vmm.NetConfig{}, "bad interface name"},
		{"tap,ifname=a/b", vmm.NetConfig{}, "bad interface name"},
		{"tap,host-ip=10.0.2.1", vmm.NetConfig{}, "bad host address"},
		{"tap,host-ip=10.0.2.0/24", vmm.NetConfig{}, "network address"},
		{"tap,mac=01:00:5e:00:00:01", vmm.NetConfig{}, "multicast"},
		{"tap,mac=52:54:00", vmm.NetConfig{}, "bad MAC"},
		{"tap,mrg-rxbuf=maybe", vmm.NetConfig{}, "want mrg-rxbuf=on or mrg-rxbuf=off"},
		{"tap,event-idx=off,event-idx=on", vmm.NetConfig{}, "event-idx given twice"},
		{"tap,mrg-rxbuf=off,event-idx=off,indirect=off", vmm.NetConfig{Mode: vmm.NetTap,
			Withhold: virtio.Bit(virtionet.FeatureMrgRxBuf) | virtio.Bit(virtio.FeatureRingEventIdx) | virtio.Bit(virtio.FeatureRingIndirectDesc)}, ""},
		{"tap,mrg-rxbuf=on", vmm.NetConfig{Mode: vmm.NetTap}, ""},
	}
	for _, tt := range tests {
		got, err := parseNet(tt.in)
		if tt.err != "" {
			if !errors.Is(err, errNetFlag) || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "\n") {
				t.Errorf("parseNet(%q) error %v, want one line with %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got.Mode != tt.want.Mode || got.IfName != tt.want.IfName || got.HostIP != tt.want.HostIP ||
			got.MAC != tt.want.MAC || got.Withhold != tt.want.Withhold {
			t.Errorf("parseNet(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

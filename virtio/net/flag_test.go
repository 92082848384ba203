package virtionet

import (
	"errors"
	"strings"
	"testing"
)

func TestParseNetFlag(t *testing.T) {
	tests := []struct {
		in   string
		want NetConfig
		err  string // substring of the error; "" = success
	}{
		{"none", NetConfig{Mode: NetNone}, ""},
		{"tap", NetConfig{Mode: NetTap}, ""},
		{"tap,ifname=tap0", NetConfig{Mode: NetTap, IfName: "tap0"}, ""},
		{"tap,host-ip=10.0.2.1/24,mac=52:54:00:aa:bb:cc,ifname=t1",
			NetConfig{Mode: NetTap, IfName: "t1", HostIP: "10.0.2.1/24", MAC: []byte{0x52, 0x54, 0, 0xaa, 0xbb, 0xcc}}, ""},
		{"", NetConfig{}, "want none or tap"},
		{"user", NetConfig{}, "want none or tap"},
		{"none,ifname=x", NetConfig{}, "none takes no options"},
		{"tap,", NetConfig{}, "not key=value"},
		{"tap,ifname", NetConfig{}, "not key=value"},
		{"tap,ifname=", NetConfig{}, "not key=value"},
		{"tap,ifname=a,ifname=b", NetConfig{}, "ifname given twice"},
		{"tap,bridge=br0", NetConfig{}, `unknown option "bridge"`},
		{"tap,ifname=waytoolonginterfacename", NetConfig{}, "bad interface name"},
		{"tap,ifname=a/b", NetConfig{}, "bad interface name"},
		{"tap,host-ip=10.0.2.1", NetConfig{}, "bad host address"},
		{"tap,host-ip=10.0.2.0/24", NetConfig{}, "network address"},
		{"tap,mac=01:00:5e:00:00:01", NetConfig{}, "multicast"},
		{"tap,mac=52:54:00", NetConfig{}, "bad MAC"},
	}
	for _, tt := range tests {
		got, err := ParseNetFlag(tt.in)
		if tt.err != "" {
			if !errors.Is(err, ErrNetFlag) || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "\n") {
				t.Errorf("ParseNetFlag(%q) error %v, want one line with %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got.Mode != tt.want.Mode || got.IfName != tt.want.IfName || got.HostIP != tt.want.HostIP ||
			got.MAC.String() != tt.want.MAC.String() {
			t.Errorf("ParseNetFlag(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestDefaultMAC(t *testing.T) {
	a, b := DefaultMAC("vm1"), DefaultMAC("vm2")
	if a.String() == b.String() || a.String() != DefaultMAC("vm1").String() {
		t.Errorf("DefaultMAC not stable and distinct: %v %v", a, b)
	}
	if a[0] != 0x52 || a[0]&1 != 0 || len(a) != 6 {
		t.Errorf("DefaultMAC %v: want 52:54:00:xx:xx:xx unicast", a)
	}
	if _, err := New(newFake(false), Config{MAC: a}); err != nil {
		t.Errorf("New rejects DefaultMAC: %v", err)
	}
}

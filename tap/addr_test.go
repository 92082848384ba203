package tap

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseHostIP(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"10.0.2.1/24", true},
		{"192.168.100.2/30", true},
		{"10.1.2.3/32", true},
		{"fd00::1/64", true},
		{"10.0.2.1", false}, // no prefix
		{"10.0.2.0/24", false},
		{"10.0.2.1/33", false},
		{"0.0.0.0/0", false},
		{"224.0.0.1/4", false},
		{"255.255.255.255/32", false},
		{"fe80::1%eth0/64", false},
		{"host/24", false},
		{"", false},
	}
	for _, tt := range tests {
		p, err := ParseHostIP(tt.in)
		if tt.ok != (err == nil) {
			t.Errorf("ParseHostIP(%q) = %v, %v; want ok=%v", tt.in, p, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrBadAddr) {
			t.Errorf("ParseHostIP(%q) error %v does not wrap ErrBadAddr", tt.in, err)
		}
		if err == nil && p.String() != tt.in {
			t.Errorf("ParseHostIP(%q) = %v", tt.in, p)
		}
	}
}

func TestNameForVM(t *testing.T) {
	tests := []struct {
		vm   string
		nic  int
		want string
	}{
		{"", 0, "govm%d"},
		{"", 1, "govm%d"},
		{"web", 0, "govm-web"},
		{"web", 1, "govm-web-1"},
		{"a/b:c d", 0, "govm-a_b_c_d"},
		{"héllo", 0, "govm-h_llo"},
		{"guest-1234", 0, "govm-guest-1234"}, // 15 bytes: fits
	}
	for _, tt := range tests {
		got := NameForVM(tt.vm, tt.nic)
		if got != tt.want {
			t.Errorf("NameForVM(%q, %d) = %q, want %q", tt.vm, tt.nic, got, tt.want)
		}
		if tt.vm != "" {
			if err := ValidName(got); err != nil {
				t.Errorf("NameForVM(%q, %d) = %q is not valid: %v", tt.vm, tt.nic, got, err)
			}
		}
	}
}

// TestNameForVMLongNames: names cut to the kernel's 15 bytes stay apart
// when they differ only past the cut (the default guest-PID names did not:
// guest-12345 and guest-12346 were both govm-guest-1234).
func TestNameForVMLongNames(t *testing.T) {
	seen := map[string]string{}
	for _, vm := range []string{"guest-12345", "guest-12346", "guest-1234567", "guest-1234568", "averyveryverylongname", "averyveryverylongnamf"} {
		for nic := range 12 {
			got := NameForVM(vm, nic)
			if err := ValidName(got); err != nil {
				t.Errorf("NameForVM(%q, %d) = %q: %v", vm, nic, got, err)
			}
			if !strings.HasPrefix(got, "govm-"+vm[:3]) {
				t.Errorf("NameForVM(%q, %d) = %q does not start with the VM name", vm, nic, got)
			}
			if nic > 0 && !strings.HasSuffix(got, fmt.Sprintf("-%d", nic)) {
				t.Errorf("NameForVM(%q, %d) = %q does not end in -%d", vm, nic, got, nic)
			}
			if NameForVM(vm, nic) != got {
				t.Errorf("NameForVM(%q, %d) is not stable", vm, nic)
			}
			key := fmt.Sprintf("%s NIC %d", vm, nic)
			if other, ok := seen[got]; ok {
				t.Errorf("%s and %s both get %q", other, key, got)
			}
			seen[got] = key
		}
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"tap0", true},
		{"govm-x", true},
		{"123456789012345", true},
		{"1234567890123456", false},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"a:b", false},
		{"a b", false},
		{"a\tb", false},
	}
	for _, tt := range tests {
		err := ValidName(tt.name)
		if tt.ok != (err == nil) {
			t.Errorf("ValidName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrBadName) {
			t.Errorf("ValidName(%q): %v does not wrap ErrBadName", tt.name, err)
		}
	}
}

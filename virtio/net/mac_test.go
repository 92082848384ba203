package virtionet

import (
	"errors"
	"testing"
)

func TestParseMAC(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" = error
	}{
		{"52:54:00:12:34:56", "52:54:00:12:34:56"},
		{"52-54-00-AB-cd-EF", "52:54:00:ab:cd:ef"},
		{"02:00:00:00:00:01", "02:00:00:00:00:01"},
		{"", ""},
		{"zz:54:00:12:34:56", ""},
		{"52:54:00:12:34", ""},
		{"52:54:00:12:34:56:78:9a", ""}, // EUI-64: not an Ethernet MAC
		{"01:00:5e:00:00:01", ""},       // multicast
		{"ff:ff:ff:ff:ff:ff", ""},       // broadcast
		{"00:00:00:00:00:00", ""},
	}
	for _, tt := range tests {
		m, err := ParseMAC(tt.in)
		if tt.want == "" {
			if !errors.Is(err, ErrBadMAC) {
				t.Errorf("ParseMAC(%q) = %v, %v; want ErrBadMAC", tt.in, m, err)
			}
			continue
		}
		if err != nil || m.String() != tt.want {
			t.Errorf("ParseMAC(%q) = %v, %v; want %s", tt.in, m, err, tt.want)
		}
	}
}

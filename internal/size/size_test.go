package size

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		err  string
	}{
		{"512M", 512 << 20, ""},
		{"512", 512 << 20, ""},
		{"3G", 3 << 30, ""},
		{"3g", 3 << 30, ""},
		{"1GiB", 1 << 30, ""},
		{"2048K", 2 << 20, ""},
		{"1T", 1 << 40, ""},
		{"0", 0, "more than zero"},
		{"0M", 0, "more than zero"},
		{"", 0, "not a number"},
		{"M", 0, "not a number"},
		{"-1G", 0, "not a number"},
		{"1.5G", 0, "not a number"},
		{"lots", 0, "not a number"},
		{"99999999999999T", 0, "too large"},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) = %d, %v; want error containing %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

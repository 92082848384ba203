package main

import "testing"

// TestParseRate: --rng-rate takes bytes per second, bare or with a K/M/G
// suffix and an optional "/s"; 0 is no limit; anything else is refused.
func TestParseRate(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "4096": 4096, "64K": 64 << 10, "1M/s": 1 << 20, " 2k ": 2 << 10} {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "-1", "1.5M", "0x10", "M"} {
		if got, err := parseRate(in); err == nil {
			t.Errorf("parseRate(%q) = %d, want an error", in, got)
		}
	}
}

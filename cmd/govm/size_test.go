package main

import (
	"strings"
	"testing"

	"github.com/govm/govm/virtio"
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
		got, err := parseSize(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseSize(%q) = %d, %v; want error containing %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestParseDisk(t *testing.T) {
	d, err := parseDisk("a.img,ro,serial=ABC")
	if err != nil || d.Path != "a.img" || !d.ReadOnly || d.Serial != "ABC" {
		t.Fatalf("parseDisk = %+v, %v", d, err)
	}
	// A serial's length is checked once, by vmm's Config check
	// (vmm TestConfigCheck, e2e TestBadInput "disk serial too long").
	for _, bad := range []string{"", ",ro", "a.img,foo", "a.img,event-idx=no", "a.img,mrg-rxbuf=off"} {
		if _, err := parseDisk(bad); err == nil {
			t.Errorf("parseDisk(%q) succeeded", bad)
		}
	}
	// Feature switches withhold ring features from the disk's offer.
	for in, want := range map[string]uint64{
		"a.img,event-idx=off":              virtio.Bit(virtio.FeatureRingEventIdx),
		"a.img,indirect=off,event-idx=off": virtio.Bit(virtio.FeatureRingIndirectDesc) | virtio.Bit(virtio.FeatureRingEventIdx),
		"a.img,event-idx=on,ro":            0,
	} {
		if d, err := parseDisk(in); err != nil || d.Withhold != want {
			t.Errorf("parseDisk(%q) withholds %#x, %v; want %#x", in, d.Withhold, err, want)
		}
	}
}

package main

import (
	"testing"

	"github.com/govm/govm/virtio"
)

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

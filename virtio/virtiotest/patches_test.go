package virtiotest

import (
	"bytes"
	"testing"
)

// TestPatchesRoundTrip: an image encoded by Patches loads back unchanged,
// including runs longer than one patch and zero gaps inside a run.
func TestPatchesRoundTrip(t *testing.T) {
	ram := make([]byte, 128<<10) // addresses past 64 KiB too
	for i := 0x1000; i < 0x1400; i++ {
		ram[i] = byte(i%7 + 1)
	}
	ram[0x2000], ram[0x2003], ram[len(ram)-1] = 1, 2, 3
	p := Patches(ram)
	if len(p) > 0x500 {
		t.Fatalf("%d bytes of patches for %d non-zero bytes", len(p), 0x403)
	}
	got := make([]byte, len(ram))
	LoadPatches(got, p)
	if !bytes.Equal(got, ram) {
		t.Fatal("the image did not load back")
	}
	// Truncated input: no panic, a prefix loads.
	got = make([]byte, len(ram))
	LoadPatches(got, p[:len(p)/2])
	if got[0x1000] != ram[0x1000] {
		t.Fatal("the first patch did not load")
	}
}

package guestmem

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func newTestMem(t *testing.T) (*Memory, []byte, []byte) {
	t.Helper()
	lo, hi := make([]byte, 64<<10), make([]byte, 16<<10)
	m, err := New(Region{GPA: 0, Host: lo}, Region{GPA: 1 << 20, Host: hi})
	if err != nil {
		t.Fatal(err)
	}
	return m, lo, hi
}

func TestSliceBounds(t *testing.T) {
	m, lo, hi := newTestMem(t)
	cases := []struct {
		gpa, n uint64
		ok     bool
	}{
		{0, 1, true},
		{0, 64 << 10, true},                    // whole low region
		{64<<10 - 1, 1, true},                  // last byte
		{64 << 10, 0, true},                    // empty at the end
		{64<<10 - 1, 2, false},                 // runs off the end
		{64 << 10, 1, false},                   // in the gap
		{1<<20 - 8, 16, false},                 // straddles gap and high region
		{1 << 20, 16 << 10, true},              // whole high region
		{1<<20 + 16<<10, 1, false},             // past the high region
		{^uint64(0) - 3, 8, false},             // overflows
		{8, ^uint64(0), false},                 // overflows
		{1 << 40, 1, false},                    // far away
		{0xffff_ffff_ffff_f000, 0x2000, false}, // classic hostile descriptor
	}
	for _, c := range cases {
		b, err := m.Slice(c.gpa, c.n)
		if c.ok != (err == nil) {
			t.Errorf("Slice(%#x, %#x): err %v, want ok=%v", c.gpa, c.n, err, c.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrOutOfRange) {
				t.Errorf("Slice(%#x, %#x): %v is not ErrOutOfRange", c.gpa, c.n, err)
			}
			continue
		}
		if uint64(len(b)) != c.n || uint64(cap(b)) != c.n {
			t.Errorf("Slice(%#x, %#x): len %d cap %d", c.gpa, c.n, len(b), cap(b))
		}
	}
	// Slices alias the backing memory of the right region.
	b, _ := m.Slice(1<<20+4, 2)
	b[0] = 0xaa
	if hi[4] != 0xaa {
		t.Fatal("high slice does not alias its region")
	}
	if err := m.WriteAt([]byte{1, 2, 3}, 10); err != nil || lo[11] != 2 {
		t.Fatalf("WriteAt: %v", err)
	}
	if m.Size() != 80<<10 {
		t.Fatalf("Size %d", m.Size())
	}
}

func TestNewRejects(t *testing.T) {
	for name, rs := range map[string][]Region{
		"empty":     {{GPA: 0, Host: nil}},
		"overlap":   {{GPA: 0, Host: make([]byte, 4096)}, {GPA: 2048, Host: make([]byte, 4096)}},
		"unaligned": {{GPA: 4, Host: make([]byte, 4096)}},
		"odd size":  {{GPA: 0, Host: make([]byte, 4099)}},
		"wraps":     {{GPA: ^uint64(0) - 4095, Host: make([]byte, 8192)}},
	} {
		if _, err := New(rs...); err == nil {
			t.Errorf("%s: New accepted %v", name, rs)
		}
	}
}

func TestAtomicAccessors(t *testing.T) {
	m, lo, _ := newTestMem(t)
	// Neighbouring halfwords survive a 16-bit store (used ring: flags|idx).
	lo[0], lo[1], lo[2], lo[3] = 0x11, 0x22, 0x33, 0x44
	if err := m.StoreUint16(2, 0xbeef); err != nil {
		t.Fatal(err)
	}
	if lo[0] != 0x11 || lo[1] != 0x22 || lo[2] != 0xef || lo[3] != 0xbe {
		t.Fatalf("bytes % x", lo[:4])
	}
	if v, _ := m.LoadUint16(2); v != 0xbeef {
		t.Fatalf("LoadUint16 = %#x", v)
	}
	if v, _ := m.LoadUint16(0); v != 0x2211 {
		t.Fatalf("LoadUint16(0) = %#x", v)
	}
	if err := m.StoreUint32(8, 0xdeadbeef); err != nil {
		t.Fatal(err)
	}
	if v, _ := m.Uint32(8); v != 0xdeadbeef {
		t.Fatalf("Uint32 = %#x", v)
	}
	for _, gpa := range []uint64{1, 3, 64 << 10, 1 << 30} {
		if _, err := m.LoadUint16(gpa); err == nil {
			t.Errorf("LoadUint16(%#x) accepted", gpa)
		}
		if err := m.StoreUint16(gpa, 1); err == nil {
			t.Errorf("StoreUint16(%#x) accepted", gpa)
		}
	}
	if _, err := m.LoadUint32(2); err == nil {
		t.Error("unaligned LoadUint32 accepted")
	}
}

// TestAtomicStore16Concurrent: two writers of adjacent halfwords (device
// writes used idx, driver writes used flags... or avail) never lose each
// other's stores.
func TestAtomicStore16Concurrent(t *testing.T) {
	m, _, _ := newTestMem(t)
	var wg sync.WaitGroup
	for half := uint64(0); half < 2; half++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20000; i++ {
				if err := m.StoreUint16(16+half*2, uint16(i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	a, _ := m.LoadUint16(16)
	b, _ := m.LoadUint16(18)
	if a != 19999 || b != 19999 {
		t.Fatalf("final halfwords %d %d, want 19999 each", a, b)
	}
}

func FuzzSlice(f *testing.F) {
	f.Add(uint64(0), uint64(1))
	f.Add(uint64(0xffff_ffff_ffff_f000), uint64(0x2000))
	f.Add(uint64(1<<20-1), uint64(2))
	f.Fuzz(func(t *testing.T, gpa, n uint64) {
		lo, hi := make([]byte, 64<<10), make([]byte, 16<<10)
		m, err := New(Region{GPA: 0, Host: lo}, Region{GPA: 1 << 20, Host: hi})
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.Slice(gpa, n)
		if err != nil {
			return
		}
		end := gpa + n
		inLo := end >= gpa && end <= 64<<10
		inHi := gpa >= 1<<20 && end >= gpa && end <= 1<<20+16<<10
		if !inLo && !inHi {
			t.Fatalf("Slice(%#x, %#x) accepted a range outside RAM", gpa, n)
		}
		if uint64(len(b)) != n {
			t.Fatalf("len %d != %d", len(b), n)
		}
	})
}

type recordObs struct{ got []string }

func (r *recordObs) Access(gpa, n uint64, write bool) {
	r.got = append(r.got, fmt.Sprintf("%#x+%d w=%v", gpa, n, write))
}

func TestObserved(t *testing.T) {
	m, err := New(Region{GPA: 0x1000, Host: make([]byte, 0x1000)})
	if err != nil {
		t.Fatal(err)
	}
	var r recordObs
	o := m.Observed(&r)
	_, _ = o.Uint16(0x1000)
	_ = o.PutUint32(0x1004, 1)
	_, _ = o.LoadUint16(0x1008)
	_ = o.StoreUint16(0x100a, 2)
	_ = o.ReadAt(make([]byte, 16), 0x1010)
	_ = o.WriteAt(make([]byte, 3), 0x1020)
	_, _ = o.Slice(0x1030, 8) // data views are not observed
	_, _ = o.Uint64(0x3000)   // outside RAM: rejected before observed
	_, _ = m.Uint16(0x1000)   // the original stays unobserved
	want := []string{"0x1000+2 w=false", "0x1004+4 w=true", "0x1008+2 w=false",
		"0x100a+2 w=true", "0x1010+16 w=false", "0x1020+3 w=true"}
	if fmt.Sprint(r.got) != fmt.Sprint(want) {
		t.Fatalf("observed %q, want %q", r.got, want)
	}
}

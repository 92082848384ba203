package vring

// Tables allocates indirect descriptor tables the way kmalloc does for a
// driver running on one CPU: objects of Linux 6.1's kmalloc size classes
// (the powers of 2, plus 96 and 192), each class in a slab of its own with
// objects packed at the class's stride (so a 96-byte object can straddle
// two lines), and a freed object is the next one handed out for its class
// (the per-CPU freelist is LIFO). That matters to the simulator: a 2-entry
// table is 32 bytes, so two of them share a 64-byte line, and a table
// freed by detach is the one the next add writes, while the device may
// still hold its lines.
type Tables struct {
	next  uint64              // bump pointer for new slabs
	end   uint64              // end of the area
	slabs map[uint64]*slab    // size class -> its slab
	free  map[uint64][]uint64 // size class -> freed objects, last freed last
}

// slab is one class's objects: [next, end) is not handed out yet.
type slab struct{ next, end uint64 }

// slabSize is the area a class takes at a time: page-aligned, like a slab.
const slabSize = 64 << 10

// NewTables returns an allocator over guest-physical [base, base+size).
func NewTables(base, size uint64) *Tables {
	return &Tables{next: base, end: base + size, slabs: map[uint64]*slab{}, free: map[uint64][]uint64{}}
}

// sizeClass is kmalloc_index's choice: 96 and 192 between 64, 128, 256.
func sizeClass(n uint64) uint64 {
	switch {
	case n > 64 && n <= 96:
		return 96
	case n > 128 && n <= 192:
		return 192
	}
	c := uint64(16)
	for c < n {
		c <<= 1
	}
	return c
}

// Alloc returns an object of at least n bytes.
func (t *Tables) Alloc(n uint64) uint64 {
	c := sizeClass(n)
	if l := t.free[c]; len(l) > 0 {
		a := l[len(l)-1]
		t.free[c] = l[:len(l)-1]
		return a
	}
	sl := t.slabs[c]
	if sl == nil || sl.next+c > sl.end {
		base := (t.next + 4095) &^ 4095
		if base+slabSize > t.end || c > slabSize {
			panic("vring: indirect table area exhausted")
		}
		t.next = base + slabSize
		sl = &slab{next: base, end: base + slabSize}
		t.slabs[c] = sl
	}
	a := sl.next
	sl.next += c
	return a
}

// Free returns an object of n bytes allocated at a.
func (t *Tables) Free(a, n uint64) {
	c := sizeClass(n)
	t.free[c] = append(t.free[c], a)
}

package vring

// Tables allocates indirect descriptor tables the way kmalloc does for a
// driver running on one CPU: objects of a power-of-2 size class (at least
// 16 bytes), aligned to their size, and a freed object is the next one
// handed out for its class (the per-CPU freelist is LIFO). That matters to
// the simulator: a 2-entry table is 32 bytes, so two of them share a
// 64-byte line, and a table freed by detach is the one the next add
// writes, while the device may still hold its lines.
type Tables struct {
	next uint64              // bump pointer for new objects
	end  uint64              // end of the area
	free map[uint64][]uint64 // size class -> freed objects, last freed last
}

// NewTables returns an allocator over guest-physical [base, base+size).
func NewTables(base, size uint64) *Tables {
	return &Tables{next: base, end: base + size, free: map[uint64][]uint64{}}
}

func sizeClass(n uint64) uint64 {
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
	a := (t.next + c - 1) &^ (c - 1)
	if a+c > t.end {
		panic("vring: indirect table area exhausted")
	}
	t.next = a + c
	return a
}

// Free returns an object of n bytes allocated at a.
func (t *Tables) Free(a, n uint64) {
	c := sizeClass(n)
	t.free[c] = append(t.free[c], a)
}

package guestmem

import (
	"sync/atomic"
	"unsafe"
)

// unsafe: Go has no 16-bit atomics. An aligned 16-bit access is single-copy
// atomic on amd64, so we read/write the halfword inside the aligned 32-bit
// word that contains it: loads use atomic.LoadUint32 on that word (never
// crossing a page, as the word is 4-byte aligned) and stores use a CAS loop so
// the neighbouring halfword (a concurrently-written guest field) is preserved.

func word(p *uint16) (*uint32, uint) {
	mis := uintptr(unsafe.Pointer(p)) & 3
	return (*uint32)(unsafe.Add(unsafe.Pointer(p), -int(mis))), uint(mis) * 8
}

func atomicLoad16(p *uint16) uint16 {
	w, shift := word(p)
	return uint16(atomic.LoadUint32(w) >> shift)
}

func atomicStore16(p *uint16, v uint16) {
	w, shift := word(p)
	for {
		old := atomic.LoadUint32(w)
		nw := old&^(0xffff<<shift) | uint32(v)<<shift
		if atomic.CompareAndSwapUint32(w, old, nw) {
			return
		}
	}
}

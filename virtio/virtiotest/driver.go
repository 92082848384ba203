// Package virtiotest is the driver side of a split virtqueue, for tests of
// the queue core and of devices. It lays out legacy rings (spec 2.7.2) in
// fake guest memory the way Linux's drivers/virtio/virtio_ring.c does, adds
// chains, publishes them, reads the used ring back, and can also write raw,
// malformed ring contents to play a hostile guest.
//
// A Driver is used from one goroutine at a time; its ring stores use the
// same atomics as the device side, so the race detector sees the
// happens-before edges a real driver's barriers provide.
package virtiotest

import (
	"testing"
	"time"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// RingPFN is the page frame of the first queue's rings; further queues
// follow on page boundaries.
const RingPFN = 1

// Driver is a fake guest driver owning one queue.
type Driver struct {
	t testing.TB
	// Mem is the fake guest memory; RAM is its backing bytes (shared by
	// every Driver from one NewQueues call).
	Mem *guestmem.Memory
	RAM []byte
	// Queue is the device-side queue, configured like a legacy transport
	// would after the driver wrote QUEUE_PFN.
	Queue *virtio.Queue
	// PFN is the value the driver wrote to QUEUE_PFN.
	PFN uint32

	size               uint16
	desc, avail, used  uint64
	dataStart, dataEnd uint64
	dataNext           uint64

	features uint64
	free     []uint16
	chains   map[uint16]*chain
	availIdx uint16 // driver's shadow of avail->idx
	lastUsed uint16 // used idx consumed by Collect
	kickOld  uint16 // avail idx at the last NeedsKick
	bell     *virtio.Doorbell
}

type chain struct {
	descs []uint16
	first uint64 // address of the first data buffer
	in    []span
}

type span struct{ addr, len uint64 }

// UsedElem is one used ring entry as Collect returns it.
type UsedElem struct {
	ID  uint16
	Len uint32
	// In holds copies of the chain's device-writable buffers (nil for a
	// chain the Driver did not build).
	In [][]byte
}

// New returns a driver for one queue of queueSize entries in memSize bytes
// of fake guest RAM.
func New(t testing.TB, memSize int, queueSize uint16) *Driver {
	return NewQueues(t, memSize, queueSize)[0]
}

// NewQueues returns one driver per queue size, sharing one memory: rings
// first (each at its own PFN), then equal data areas.
func NewQueues(t testing.TB, memSize int, sizes ...uint16) []*Driver {
	t.Helper()
	ram := make([]byte, memSize)
	mem, err := guestmem.New(guestmem.Region{GPA: 0, Host: ram})
	if err != nil {
		t.Fatalf("virtiotest: %v", err)
	}
	pfn := uint32(RingPFN)
	ds := make([]*Driver, len(sizes))
	for i, size := range sizes {
		// Closed by the first cleanup registered, so the last to run:
		// a device a test stops in its own cleanup is woken by a ring.
		bell, err := virtio.NewDoorbell()
		if err != nil {
			t.Fatalf("virtiotest: %v", err)
		}
		t.Cleanup(func() { bell.Close() })
		d := &Driver{t: t, Mem: mem, RAM: ram, PFN: pfn, size: size,
			chains: map[uint16]*chain{}, bell: bell}
		d.desc, d.avail, d.used = virtio.LegacyRingAddrs(pfn, size)
		pages := (virtio.LegacyRingBytes(size) + virtio.LegacyAlign - 1) / virtio.LegacyAlign
		pfn += uint32(pages)
		q := virtio.NewQueue(size)
		q.Index = i
		q.DescAddr, q.AvailAddr, q.UsedAddr = d.desc, d.avail, d.used
		q.Ready = true
		d.Queue = q
		for j := int(size) - 1; j >= 0; j-- {
			d.free = append(d.free, uint16(j))
		}
		ds[i] = d
	}
	start := uint64(pfn) * virtio.LegacyAlign
	if start >= uint64(memSize) {
		t.Fatalf("virtiotest: %d bytes of memory too small for the rings", memSize)
	}
	per := (uint64(memSize) - start) / uint64(len(sizes)) &^ 15
	for i, d := range ds {
		d.dataStart = start + uint64(i)*per
		d.dataEnd = d.dataStart + per
		d.dataNext = d.dataStart
	}
	return ds
}

// Activation builds what a transport hands a device at DRIVER_OK: the
// drivers' queues with features negotiated, their doorbells, intr.
func Activation(intr virtio.Interrupt, features uint64, ds ...*Driver) virtio.Activation {
	a := virtio.Activation{Mem: ds[0].Mem, Features: features, Intr: intr}
	for _, d := range ds {
		d.SetFeatures(features)
		a.Queues = append(a.Queues, d.Queue)
		a.Bells = append(a.Bells, d.bell)
	}
	return a
}

// SetFeatures negotiates ring features on both sides: the device queue and
// the driver's own kick / interrupt logic.
func (d *Driver) SetFeatures(f uint64) {
	d.features = f
	d.Queue.SetFeatures(f)
}

// Alloc reserves n bytes (16-byte aligned) of the driver's data area, used
// circularly: tests must not keep more than the area in flight.
func (d *Driver) Alloc(n uint64) uint64 {
	n = (n + 15) &^ 15
	if n > d.dataEnd-d.dataStart {
		d.t.Errorf("virtiotest: allocation of %d bytes larger than the data area", n)
		return d.dataStart
	}
	if d.dataNext+n > d.dataEnd {
		d.dataNext = d.dataStart
	}
	a := d.dataNext
	d.dataNext += n
	return a
}

// FreeDescs is the number of descriptors not in flight.
func (d *Driver) FreeDescs() int { return len(d.free) }

// TryBuildChain writes a chain of len(out) readable buffers (with those
// contents) followed by writable buffers of the given sizes (zeroed), and
// returns its head without publishing it. ok is false when there are not
// enough free descriptors.
func (d *Driver) TryBuildChain(out [][]byte, in []int) (head uint16, ok bool) {
	n := len(out) + len(in)
	if n == 0 || n > len(d.free) {
		return 0, false
	}
	c := &chain{}
	for i := 0; i < n; i++ {
		c.descs = append(c.descs, d.free[len(d.free)-1])
		d.free = d.free[:len(d.free)-1]
	}
	for i, idx := range c.descs {
		addr, ln, flags := d.buffer(c, out, in, i)
		var next uint16
		if i+1 < n {
			flags |= virtio.DescFlagNext
			next = c.descs[i+1]
		}
		d.SetDesc(idx, addr, uint32(ln), flags, next)
	}
	d.chains[c.descs[0]] = c
	return c.descs[0], true
}

// buffer allocates and fills the i-th buffer of a chain.
func (d *Driver) buffer(c *chain, out [][]byte, in []int, i int) (addr, ln uint64, flags uint16) {
	if i < len(out) {
		ln = uint64(len(out[i]))
		addr = d.Alloc(ln)
		copy(d.RAM[addr:], out[i])
		if i == 0 {
			c.first = addr
		}
		return addr, ln, 0
	}
	defer func() {
		if i == 0 {
			c.first = addr
		}
	}()
	ln = uint64(in[i-len(out)])
	addr = d.Alloc(ln)
	clear(d.RAM[addr : addr+ln])
	c.in = append(c.in, span{addr, ln})
	return addr, ln, virtio.DescFlagWrite
}

// BuildChain is TryBuildChain failing the test when descriptors run out.
func (d *Driver) BuildChain(out [][]byte, in []int) uint16 {
	d.t.Helper()
	head, ok := d.TryBuildChain(out, in)
	if !ok {
		d.t.Fatalf("virtiotest: no room for a chain of %d descriptors", len(out)+len(in))
	}
	return head
}

// AddChain builds a chain and publishes it on the available ring.
func (d *Driver) AddChain(out [][]byte, in []int) uint16 {
	d.t.Helper()
	head := d.BuildChain(out, in)
	d.PublishAvail(head)
	return head
}

// BuildIndirectChain writes the buffers into an indirect table (spec
// 2.7.5.3) referenced by a single descriptor, without publishing it.
func (d *Driver) BuildIndirectChain(out [][]byte, in []int) uint16 {
	d.t.Helper()
	if len(d.free) == 0 {
		d.t.Fatalf("virtiotest: no free descriptor")
	}
	n := len(out) + len(in)
	head := d.free[len(d.free)-1]
	d.free = d.free[:len(d.free)-1]
	c := &chain{descs: []uint16{head}}
	table := d.Alloc(uint64(16 * n))
	for i := 0; i < n; i++ {
		addr, ln, flags := d.buffer(c, out, in, i)
		var next uint16
		if i+1 < n {
			flags |= virtio.DescFlagNext
			next = uint16(i + 1)
		}
		d.writeDesc(table+16*uint64(i), addr, uint32(ln), flags, next)
	}
	d.SetDesc(head, table, uint32(16*n), virtio.DescFlagIndirect, 0)
	d.chains[head] = c
	return head
}

// AddIndirectChain builds an indirect chain and publishes it.
func (d *Driver) AddIndirectChain(out [][]byte, in []int) uint16 {
	d.t.Helper()
	head := d.BuildIndirectChain(out, in)
	d.PublishAvail(head)
	return head
}

// PublishAvail puts heads on the available ring and then publishes the new
// avail idx with a release store (spec 2.7.13.3), as virtqueue_add does.
func (d *Driver) PublishAvail(heads ...uint16) {
	for _, h := range heads {
		d.put16(d.avail+4+2*uint64(d.availIdx&(d.size-1)), h)
		d.availIdx++
	}
	d.store16(d.avail+2, d.availIdx)
}

// WaitUsedIdx polls until used idx reaches idx (or passes it), for at most
// timeout. Interrupts may be suppressed, so tests of devices wait on the
// ring itself.
func (d *Driver) WaitUsedIdx(idx uint16, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if int16(d.UsedIdx()-idx) >= 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// WaitSleeping waits up to timeout for the device to sleep on this queue's
// kick (its Watch's Sleeping, set after its last look at the ring): a chain
// published from then on is one it can find only on a kick (or by a poll
// it was not doing). False if it never slept.
func (d *Driver) WaitSleeping(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !d.Queue.Watch().Sleeping.Load() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
	return true
}

// Prepend puts a direct readable descriptor holding out in front of the
// built (unpublished) chain rest and returns the new head: with rest from
// BuildIndirectChain this is the "direct descriptors, then one indirect"
// shape of spec 2.7.5.3.2.
func (d *Driver) Prepend(out []byte, rest uint16) uint16 {
	d.t.Helper()
	c, ok := d.chains[rest]
	if !ok || len(d.free) == 0 {
		d.t.Fatalf("virtiotest: cannot prepend to %d", rest)
	}
	head := d.free[len(d.free)-1]
	d.free = d.free[:len(d.free)-1]
	addr := d.Alloc(uint64(len(out)))
	copy(d.RAM[addr:], out)
	d.SetDesc(head, addr, uint32(len(out)), virtio.DescFlagNext, rest)
	delete(d.chains, rest)
	c.descs = append([]uint16{head}, c.descs...)
	d.chains[head] = c
	return head
}

// LastUsed is the used idx up to which Collect has consumed.
func (d *Driver) LastUsed() uint16 { return d.lastUsed }

// Segment0 returns the guest address of the first buffer of a chain this
// driver built and has not yet collected, so a test can rewrite a request
// before publishing it.
func (d *Driver) Segment0(head uint16) uint64 {
	c, ok := d.chains[head]
	if !ok {
		d.t.Errorf("virtiotest: %d is not a chain in flight", head)
		return 0
	}
	return c.first
}

// Reset is a device reset seen from both sides (spec 2.4, 4.1.4.10): the
// device queue forgets everything (Queue.Reset, as the transport does after
// status 0), and the driver sets the queue up again at the same PFN with
// zeroed rings and every descriptor free, as Linux's legacy virtio-pci
// driver does when it re-probes. The negotiated ring features are kept.
func (d *Driver) Reset() {
	clear(d.RAM[d.desc : d.desc+virtio.LegacyRingBytes(d.size)])
	d.free = d.free[:0]
	for j := int(d.size) - 1; j >= 0; j-- {
		d.free = append(d.free, uint16(j))
	}
	d.chains = map[uint16]*chain{}
	d.availIdx, d.lastUsed, d.kickOld = 0, 0, 0
	d.dataNext = d.dataStart
	q := d.Queue
	q.Reset()
	q.DescAddr, q.AvailAddr, q.UsedAddr = d.desc, d.avail, d.used
	q.Ready = true
	q.SetFeatures(d.features)
}

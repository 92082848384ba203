package virtiotest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// LoopRig runs a device's real I/O goroutine over guest memory that a fuzz
// input chose (descriptor tables, rings, indexes, event fields, buffers),
// and checks what every device must guarantee whatever that memory holds:
// it does not panic or hang (Reset returns), it reports only guest errors,
// and on each queue every chain it took was used once, except at most one
// held by a guest error that stopped the queue. The device's own checks
// come after Run.
type LoopRig struct {
	RAM    []byte
	Mem    *guestmem.Memory
	Queues []*virtio.Queue
	Intr   *RecordingInterrupt
	// MayHold: the device may hold one chain without an error when it is
	// reset (virtio-rng keeps a buffer its rate limit cannot fill yet).
	MayHold bool
	bells   []*virtio.Doorbell
}

// FuzzFeatures are the ring features an input byte picks: bit 0
// EVENT_IDX, bit 1 INDIRECT_DESC, bit 2 NOTIFY_ON_EMPTY.
func FuzzFeatures(b byte) uint64 {
	var f uint64
	for i, bit := range []uint{virtio.FeatureRingEventIdx, virtio.FeatureRingIndirectDesc, virtio.FeatureNotifyOnEmpty} {
		if b&(1<<i) != 0 {
			f |= virtio.Bit(bit)
		}
	}
	return f
}

// NewLoopRig lays out one queue per size, queue i's legacy ring at page
// pfns[i], in ramSize bytes of RAM loaded from patches (LoadPatches), with
// the ring features features. The queues' Ready and Index are set as a
// transport sets them. Doorbells are closed at the test's end.
func NewLoopRig(t testing.TB, ramSize int, patches []byte, features uint64, pfns []uint32, sizes []uint16) *LoopRig {
	t.Helper()
	r := &LoopRig{RAM: make([]byte, ramSize), Intr: NewRecordingInterrupt()}
	LoadPatches(r.RAM, patches)
	mem, err := guestmem.New(guestmem.Region{GPA: 0, Host: r.RAM})
	if err != nil {
		t.Fatal(err)
	}
	r.Mem = mem
	for i, size := range sizes {
		q := virtio.NewQueue(size)
		q.Index = i
		q.DescAddr, q.AvailAddr, q.UsedAddr = virtio.LegacyRingAddrs(pfns[i], size)
		q.Ready = true
		q.SetFeatures(features)
		if err := q.Validate(mem); err != nil {
			t.Fatal(err)
		}
		bell, err := virtio.NewDoorbell()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bell.Close() }) // after the Reset in Run
		r.Queues, r.bells = append(r.Queues, q), append(r.bells, bell)
	}
	return r
}

// Activation is what the transport hands the device at DRIVER_OK.
func (r *LoopRig) Activation(features uint64) virtio.Activation {
	return virtio.Activation{Mem: r.Mem, Features: features, Queues: r.Queues, Bells: r.bells, Intr: r.Intr}
}

// UsedIdx is queue i's used idx as guest memory holds it.
func (r *LoopRig) UsedIdx(i int) uint16 {
	u, _ := r.Mem.LoadUint16(r.Queues[i].UsedAddr + 2)
	return u
}

// Run rings every doorbell and waits until queue i's used idx reaches
// want[i] for each want[i] > 0 (none: until no used idx has moved for a
// while, at most 100 ms), then resets the device with reset and checks the
// invariants (see LoopRig).
func (r *LoopRig) Run(t testing.TB, reset func(), want ...uint16) {
	t.Helper()
	for _, b := range r.bells {
		b.Ring()
	}
	sum := func() (s int) {
		for i := range r.Queues {
			s += int(r.UsedIdx(i))
		}
		return s
	}
	reached := func() bool {
		for i, w := range want {
			if w != 0 && r.UsedIdx(i) != w {
				return false
			}
		}
		return true
	}
	if slices.ContainsFunc(want, func(w uint16) bool { return w != 0 }) {
		for deadline := time.Now().Add(10 * time.Second); !reached() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	} else {
		last, stable := sum(), 0
		for deadline := time.Now().Add(100 * time.Millisecond); stable < 5 && time.Now().Before(deadline); {
			time.Sleep(200 * time.Microsecond)
			if now := sum(); now == last {
				stable++
			} else {
				last, stable = now, 0
			}
		}
	}
	done := make(chan struct{})
	go func() { reset(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Reset did not return: the I/O goroutine hangs (queue 0: used idx %d, next avail %d)",
			r.UsedIdx(0), r.Queues[0].NextAvail())
	}
	errs := r.Intr.Errors()
	for _, err := range errs {
		var ge *virtio.GuestError
		if !errors.As(err, &ge) {
			t.Fatalf("device error %v is not a GuestError", err)
		}
	}
	for i, q := range r.Queues {
		held := uint16(q.InFlight())
		if held > 1 || (held == 1 && len(errs) == 0 && !r.MayHold) || q.NextUsed()+held != q.NextAvail() {
			t.Fatalf("queue %d: used %d + in flight %d != taken %d (device errors %v)", i, q.NextUsed(), held, q.NextAvail(), errs)
		}
		// The device publishes used idx after the chain's data, so a
		// buffer the guest aimed at the used ring cannot leave it
		// otherwise.
		if q.NextUsed() != 0 && r.UsedIdx(i) != q.NextUsed() {
			t.Fatalf("queue %d: used idx in RAM %d, device used %d", i, r.UsedIdx(i), q.NextUsed())
		}
	}
}

package virtio_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// TestPackedNeedsInterrupt is the truth table of spec 2.8.10 for used
// buffer notifications: the device uses `used` buffers of one descriptor
// each from a fresh ring, the driver's event suppression area says flags /
// off_wrap, and NeedsInterrupt decides.
func TestPackedNeedsInterrupt(t *testing.T) {
	const w1 = virtio.PackedEventWrap
	tests := []struct {
		name     string
		features uint64
		flags    uint16
		offWrap  uint16
		used     int
		want     bool
	}{
		{"enable", 0, virtio.PackedEventEnable, 0, 1, true},
		{"enable nothing used", 0, virtio.PackedEventEnable, 0, 0, false},
		{"disable", 0, virtio.PackedEventDisable, 0, 3, false},
		{"disable event idx", eventIdx, virtio.PackedEventDisable, 0 | w1, 3, false},
		{"reserved flags 3", eventIdx, 3, 5 | w1, 1, true},
		{"reserved bits above flags", 0, 4 | virtio.PackedEventDisable, 0, 1, false},
		{"desc without event idx", 0, virtio.PackedEventDesc, 9 | w1, 1, true},
		{"desc reached", eventIdx, virtio.PackedEventDesc, 0 | w1, 1, true},
		{"desc crossed", eventIdx, virtio.PackedEventDesc, 2 | w1, 3, true},
		{"desc not reached", eventIdx, virtio.PackedEventDesc, 3 | w1, 3, false},
		{"desc next lap", eventIdx, virtio.PackedEventDesc, 0, 3, false},
		{"desc offset beyond ring", eventIdx, virtio.PackedEventDesc, 16 | w1, 1, true},
		{"desc offset max", eventIdx, virtio.PackedEventDesc, 0x7fff, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := virtiotest.NewPacked(t, memSize, 16)
			d.SetFeatures(tt.features)
			for i := 0; i < tt.used; i++ {
				d.Add(nil, []int{1})
				c, err := d.Queue.Pop(d.Mem)
				if err != nil || c == nil {
					t.Fatalf("Pop: %v", err)
				}
				if err := d.Queue.AddUsed(d.Mem, c.Head, 0); err != nil {
					t.Fatal(err)
				}
			}
			d.SetDriverEvent(tt.offWrap, tt.flags)
			got, err := d.Queue.NeedsInterrupt(d.Mem)
			if err != nil || got != tt.want {
				t.Fatalf("NeedsInterrupt = %v, %v; want %v", got, err, tt.want)
			}
			if again, _ := d.Queue.NeedsInterrupt(d.Mem); again {
				t.Fatal("second NeedsInterrupt with nothing new = true")
			}
		})
	}
}

// TestPackedEventAcrossWrap checks the EVENT_IDX decision against its
// definition, many laps round small rings with chains of several
// descriptors: interrupt iff some used position the device moved over
// since the last decision (written or skipped) has the event's offset and
// wrap counter.
func TestPackedEventAcrossWrap(t *testing.T) {
	for _, size := range []uint16{1, 2, 4, 8} {
		t.Run(fmt.Sprint("size ", size), func(t *testing.T) {
			d := virtiotest.NewPacked(t, memSize, size)
			d.SetFeatures(eventIdx)
			rng := rand.New(rand.NewPCG(uint64(size), 2))
			_, signalled := d.Queue.Counters()
			yes := 0
			for step := 0; step < 400; step++ {
				// Use up to two chains of 1..size descriptors (or
				// none), then ask about a random event.
				for k := rng.IntN(3); k > 0; k-- {
					n := 1 + rng.IntN(int(size))
					if d.FreeDescs() < n {
						break
					}
					d.Add(make([][]byte, n), nil)
					c, _ := d.Queue.Pop(d.Mem)
					if err := d.Queue.AddUsed(d.Mem, c.Head, 0); err != nil {
						t.Fatal(err)
					}
				}
				off, w := uint16(rng.IntN(int(size))), uint16(rng.IntN(2))
				d.SetDriverEvent(off|w<<15, virtio.PackedEventDesc)
				_, now := d.Queue.Counters()
				want := false
				for c := signalled; c != now; c++ {
					if c&(size-1) == off && 1^(c/size)&1 == w {
						want = true
					}
				}
				got, err := d.Queue.NeedsInterrupt(d.Mem)
				if err != nil || got != want {
					t.Fatalf("step %d: used %d -> %d, event %d/%d: NeedsInterrupt = %v, %v; want %v",
						step, signalled, now, off, w, got, err, want)
				}
				if got {
					yes++
				}
				signalled = now
				d.Collect()
			}
			if _, used := d.Queue.Counters(); int(used) < 10*int(size) || yes == 0 {
				t.Fatalf("only %d positions used, %d interrupts", used, yes)
			}
		})
	}
}

// TestPackedEventWindow: the window starts where the last decision left
// it, so each crossing interrupts once, also when it is the ring's end.
func TestPackedEventWindow(t *testing.T) {
	d := virtiotest.NewPacked(t, memSize, 4)
	d.SetFeatures(eventIdx)
	complete := func(n int) bool {
		for i := 0; i < n; i++ {
			d.Add(nil, []int{1})
			c, _ := d.Queue.Pop(d.Mem)
			_ = d.Queue.AddUsed(d.Mem, c.Head, 0)
		}
		got, err := d.Queue.NeedsInterrupt(d.Mem)
		if err != nil {
			t.Fatal(err)
		}
		d.Collect()
		return got
	}
	const w1 = virtio.PackedEventWrap
	d.SetDriverEvent(3|w1, virtio.PackedEventDesc)
	if complete(3) { // positions 0-2
		t.Fatal("interrupted before position 3")
	}
	if !complete(2) { // 3 (wrap 1) and 0 (wrap 0): crosses the ring end
		t.Fatal("crossing position 3 did not interrupt")
	}
	if complete(3) { // 1-3, wrap 0: 3/1 is behind
		t.Fatal("interrupted for an event already signalled")
	}
	d.SetDriverEvent(1|w1, virtio.PackedEventDesc) // position 1 in the third lap
	if complete(1) {
		t.Fatal("interrupted a lap early")
	}
	if !complete(1) {
		t.Fatal("position 1 of the third lap did not interrupt")
	}
}

func TestPackedDisableEnableNotify(t *testing.T) {
	t.Run("flags", func(t *testing.T) {
		d := virtiotest.NewPacked(t, memSize, 4)
		q := d.Queue
		if err := q.DisableNotify(d.Mem); err != nil {
			t.Fatal(err)
		}
		if _, flags := d.DeviceEvent(); flags != virtio.PackedEventDisable {
			t.Fatalf("device event flags %d after DisableNotify", flags)
		}
		d.Add(nil, []int{1})
		if d.NeedsKick() {
			t.Fatal("driver would kick while notifications are disabled")
		}
		more, err := q.EnableNotify(d.Mem)
		if err != nil || !more {
			t.Fatalf("EnableNotify = %v, %v; want true (buffer added while disabled)", more, err)
		}
		if _, flags := d.DeviceEvent(); flags != virtio.PackedEventEnable {
			t.Fatalf("device event flags %d after EnableNotify", flags)
		}
		if c, _ := q.Pop(d.Mem); c == nil {
			t.Fatal("no chain")
		}
		if more, _ := q.EnableNotify(d.Mem); more {
			t.Fatal("EnableNotify on a drained ring = true")
		}
		d.Add(nil, []int{1})
		if !d.NeedsKick() {
			t.Fatal("driver would not kick after EnableNotify")
		}
	})
	t.Run("event idx", func(t *testing.T) {
		d := virtiotest.NewPacked(t, memSize, 4)
		d.SetFeatures(eventIdx)
		q := d.Queue
		// Three buffers of two descriptors: the third starts at
		// position 0 of the second lap.
		for i := 0; i < 2; i++ {
			d.Add([][]byte{{1}}, []int{1})
		}
		_ = q.DisableNotify(d.Mem) // nothing to write with EVENT_IDX
		for i := 0; i < 2; i++ {
			c, _ := q.Pop(d.Mem)
			q.AddUsed(d.Mem, c.Head, 0)
		}
		d.Collect()
		if more, err := q.EnableNotify(d.Mem); more || err != nil {
			t.Fatalf("EnableNotify = %v, %v; want false", more, err)
		}
		if offWrap, flags := d.DeviceEvent(); flags != virtio.PackedEventDesc || offWrap != 0 {
			t.Fatalf("device event %#x/%d, want position 0 wrap 0, DESC", offWrap, flags)
		}
		d.NeedsKick() // forget the first two
		d.Add([][]byte{{1}}, []int{1})
		if !d.NeedsKick() {
			t.Fatal("no kick for the descriptor EnableNotify named")
		}
		_ = q.DisableNotify(d.Mem)
		q.Pop(d.Mem)
		d.Add([][]byte{{1}}, nil) // position 2: not the event
		if d.NeedsKick() {
			t.Fatal("kick while draining")
		}
		if more, _ := q.EnableNotify(d.Mem); !more {
			t.Fatal("EnableNotify missed the buffer added while draining")
		}
		if offWrap, _ := d.DeviceEvent(); offWrap != 2 {
			t.Fatalf("off_wrap %#x, want position 2 wrap 0", offWrap)
		}
		if p, err := q.Pending(d.Mem); !p || err != nil {
			t.Fatalf("Pending = %v, %v", p, err)
		}
		q.Pop(d.Mem)
		if p, _ := q.Pending(d.Mem); p {
			t.Fatal("Pending on a drained ring")
		}
	})
}

// TestPackedNoLostNotifications races a driver goroutine (kicking only
// when the device asks, sleeping until interrupted with interrupts armed
// as virtqueue_enable_cb does) against a device goroutine serving the
// queue the way virtio.Loop does (disable, drain, decide on interrupts,
// enable and re-check, sleep until kicked). A lost kick or interrupt
// leaves both asleep and the test times out.
func TestPackedNoLostNotifications(t *testing.T) {
	const total = 10000
	for _, tc := range []struct {
		name     string
		features uint64
		batch    int
	}{
		{"flags", 0, 0},
		{"flags batch 1", 0, 1},
		{"event idx", eventIdx, 0},
		{"event idx indirect batch 3", eventIdx | indirectFeatures, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := virtiotest.NewPacked(t, memSize, 8)
			d.SetFeatures(tc.features)
			kick := make(chan struct{}, 1)
			irq := make(chan struct{}, 1)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				runPackedDevice(t, d.Mem, d.Queue, kick, irq, stop, tc.batch)
			}()
			defer func() { close(stop); wg.Wait() }()

			seq := map[uint16]uint16{} // id -> request number
			completed, added := 0, 0
			deadline := time.After(20 * time.Second)
			for completed < total {
				d.DisableCB()
				for _, e := range d.Collect() {
					s := seq[e.ID]
					if len(e.In) != 1 || e.In[0][0] != byte(s>>8) || e.In[0][1] != byte(s) {
						t.Fatalf("buffer %d (request %d): response %v", e.ID, s, e.In)
					}
					completed++
				}
				if completed == total {
					break
				}
				if added < total && d.FreeDescs() >= 2 && d.FreeIDs() > 0 {
					req := [][]byte{{byte(added), byte(added >> 8)}}
					var id uint16
					if tc.features&indirectFeatures != 0 && added%2 == 0 {
						id = d.AddIndirect(req, []int{2})
					} else {
						id = d.Add(req, []int{2})
					}
					seq[id] = uint16(added)
					added++
					if d.NeedsKick() {
						select {
						case kick <- struct{}{}:
						default:
						}
					}
					continue
				}
				if d.EnableCB() {
					continue
				}
				select {
				case <-irq:
				case <-deadline:
					pos, w := d.NextAvail()
					upos, uw := d.UsedPos()
					offWrap, flags := d.DeviceEvent()
					a, u := d.Queue.Counters()
					t.Fatalf("stuck: added %d completed %d free %d; driver avail %d/%d used %d/%d; device event %#x/%d; device counters %d %d",
						added, completed, d.FreeDescs(), pos, w, upos, uw, offWrap, flags, a, u)
				}
			}
		})
	}
}

// runPackedDevice serves q until stop: each request's two bytes come back
// swapped. It decides about interrupts after every batch buffers (0: once
// per pass), as a Server with Batch set does.
func runPackedDevice(t *testing.T, mem *guestmem.Memory, q *virtio.PackedQueue,
	kick <-chan struct{}, irq chan<- struct{}, stop <-chan struct{}, batch int) {
	signal := func() {
		need, err := q.NeedsInterrupt(mem)
		if err != nil {
			t.Error(err)
		}
		if need {
			select {
			case irq <- struct{}{}:
			default:
			}
		}
	}
	for {
		if err := q.DisableNotify(mem); err != nil {
			t.Error(err)
			return
		}
		for {
			n := 0
			for {
				c, err := q.Pop(mem)
				if err != nil {
					t.Error(err)
					return
				}
				if c == nil {
					break
				}
				var b [2]byte
				c.Reader().Read(b[:])
				c.Writer().Write([]byte{b[1], b[0]})
				if err := q.AddUsed(mem, c.Head, c.Written()); err != nil {
					t.Error(err)
					return
				}
				if n++; batch > 0 && n%batch == 0 {
					signal()
				}
			}
			signal()
			// Give the driver time to publish with notifications
			// still disabled: the window the re-check below closes.
			runtime.Gosched()
			more, err := q.EnableNotify(mem)
			if err != nil {
				t.Error(err)
				return
			}
			if !more {
				break
			}
			_ = q.DisableNotify(mem)
		}
		select {
		case <-kick:
		case <-stop:
			return
		}
	}
}

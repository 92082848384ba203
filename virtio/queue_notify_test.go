package virtio_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

var (
	eventIdx      = virtio.Bit(virtio.FeatureRingEventIdx)
	notifyOnEmpty = virtio.Bit(virtio.FeatureNotifyOnEmpty)
)

func TestNeedEvent(t *testing.T) {
	tests := []struct {
		event, new, old uint16
		want            bool
	}{
		{0, 1, 0, true},
		{1, 1, 0, false}, // event 1 not yet passed: idx must move past it
		{2, 3, 0, true},
		{3, 3, 0, false},
		{5, 9, 6, false}, // event behind old: already signalled
		{0xffff, 0, 0xfffe, true},
		{0xffff, 2, 0xfffe, true},
		{0, 2, 0xfffe, true},
		{2, 2, 0xfffe, false},
		{7, 7, 7, false},
	}
	for _, tt := range tests {
		if got := virtio.NeedEvent(tt.event, tt.new, tt.old); got != tt.want {
			t.Errorf("NeedEvent(%d, %d, %d) = %v, want %v", tt.event, tt.new, tt.old, got, tt.want)
		}
	}
}

// TestNeedsInterrupt is the truth table of spec 2.7.7 and 6.3: the device
// consumes and completes `used` chains (out of used+pending offered), the
// driver has set flags / used_event, and NeedsInterrupt decides.
func TestNeedsInterrupt(t *testing.T) {
	tests := []struct {
		name       string
		features   uint64
		availFlags uint16
		usedEvent  uint16
		used       int // chains completed before the call
		pending    int // chains still on the avail ring
		want       bool
	}{
		{"plain", 0, 0, 0, 1, 0, true},
		{"plain nothing used", 0, 0, 0, 0, 1, false},
		{"no_interrupt", 0, virtio.AvailFlagNoInterrupt, 0, 2, 1, false},
		{"no_interrupt empty ring", 0, virtio.AvailFlagNoInterrupt, 0, 2, 0, false},
		{"no_interrupt empty ring notify_on_empty", notifyOnEmpty, virtio.AvailFlagNoInterrupt, 0, 2, 0, true},
		{"no_interrupt non-empty notify_on_empty", notifyOnEmpty, virtio.AvailFlagNoInterrupt, 0, 2, 1, false},
		{"notify_on_empty nothing used", notifyOnEmpty, virtio.AvailFlagNoInterrupt, 0, 0, 0, false},
		{"event idx reached", eventIdx, 0, 0, 1, 0, true},
		{"event idx crossed", eventIdx, 0, 2, 3, 0, true},
		{"event idx not reached", eventIdx, 0, 3, 3, 1, false},
		{"event idx far", eventIdx, 0, 100, 4, 0, false},
		{"event idx ignores no_interrupt", eventIdx, virtio.AvailFlagNoInterrupt, 0, 1, 0, true},
		{"event idx notify_on_empty", eventIdx | notifyOnEmpty, 0, 100, 4, 0, true},
		{"event idx notify_on_empty non-empty", eventIdx | notifyOnEmpty, 0, 100, 4, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := virtiotest.New(t, memSize, 16)
			d.SetFeatures(tt.features)
			for i := 0; i < tt.used+tt.pending; i++ {
				d.AddChain(nil, []int{1})
			}
			for i := 0; i < tt.used; i++ {
				c, err := d.Queue.Pop(d.Mem)
				if err != nil || c == nil {
					t.Fatalf("Pop: %v", err)
				}
				if err := d.Queue.AddUsed(d.Mem, c.Head, 0); err != nil {
					t.Fatal(err)
				}
			}
			d.SetAvailFlags(tt.availFlags)
			d.SetUsedEvent(tt.usedEvent)
			got, err := d.Queue.NeedsInterrupt(d.Mem)
			if err != nil || got != tt.want {
				t.Fatalf("NeedsInterrupt = %v, %v; want %v", got, err, tt.want)
			}
			// Nothing new since: never again.
			if again, _ := d.Queue.NeedsInterrupt(d.Mem); again {
				t.Fatalf("second NeedsInterrupt with nothing new = true")
			}
		})
	}
}

// TestNeedsInterruptEventIdxWindow: old is the used idx at the previous
// call, so each crossing of used_event interrupts exactly once.
func TestNeedsInterruptEventIdxWindow(t *testing.T) {
	d := virtiotest.New(t, memSize, 16)
	d.SetFeatures(eventIdx)
	complete := func(n int) bool {
		for i := 0; i < n; i++ {
			d.AddChain(nil, []int{1})
			c, _ := d.Queue.Pop(d.Mem)
			_ = d.Queue.AddUsed(d.Mem, c.Head, 0)
		}
		d.Collect()
		got, err := d.Queue.NeedsInterrupt(d.Mem)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	d.SetUsedEvent(0)
	if !complete(1) { // used 0 -> 1 crosses 0
		t.Fatal("first completion did not interrupt")
	}
	if complete(1) { // 1 -> 2, used_event still 0: driver did not re-arm
		t.Fatal("interrupted without the driver re-arming used_event")
	}
	d.SetUsedEvent(4)
	if complete(2) { // 2 -> 4 does not pass 4
		t.Fatal("interrupted before used_event")
	}
	if !complete(1) { // 4 -> 5 crosses 4
		t.Fatal("crossing used_event did not interrupt")
	}
}

func TestDisableEnableNotify(t *testing.T) {
	t.Run("flags", func(t *testing.T) {
		d := virtiotest.New(t, memSize, 16)
		q := d.Queue
		if err := q.DisableNotify(d.Mem); err != nil {
			t.Fatal(err)
		}
		if d.UsedFlags()&virtio.UsedFlagNoNotify == 0 {
			t.Fatal("DisableNotify did not set VRING_USED_F_NO_NOTIFY")
		}
		d.AddChain(nil, []int{1})
		if d.NeedsKick() {
			t.Fatal("driver would kick while notifications are disabled")
		}
		more, err := q.EnableNotify(d.Mem)
		if err != nil || !more {
			t.Fatalf("EnableNotify = %v, %v; want true (buffer added while disabled)", more, err)
		}
		if d.UsedFlags() != 0 {
			t.Fatal("EnableNotify left NO_NOTIFY set")
		}
		if c, _ := q.Pop(d.Mem); c == nil {
			t.Fatal("no chain")
		}
		if more, _ := q.EnableNotify(d.Mem); more {
			t.Fatal("EnableNotify on a drained ring = true")
		}
		d.AddChain(nil, []int{1})
		if !d.NeedsKick() {
			t.Fatal("driver would not kick after EnableNotify")
		}
	})
	t.Run("event idx", func(t *testing.T) {
		d := virtiotest.New(t, memSize, 16)
		d.SetFeatures(eventIdx)
		q := d.Queue
		d.AddChain(nil, []int{1})
		d.AddChain(nil, []int{1})
		if !d.NeedsKick() { // avail_event 0 crossed
			t.Fatal("first buffers did not kick")
		}
		_ = q.DisableNotify(d.Mem)
		q.Pop(d.Mem)
		q.Pop(d.Mem)
		if more, err := q.EnableNotify(d.Mem); more || err != nil {
			t.Fatalf("EnableNotify = %v, %v; want false", more, err)
		}
		if d.AvailEvent() != 2 {
			t.Fatalf("avail_event = %d, want 2", d.AvailEvent())
		}
		d.AddChain(nil, []int{1}) // 2 -> 3 crosses avail_event 2
		if !d.NeedsKick() {
			t.Fatal("no kick after EnableNotify")
		}
		_ = q.DisableNotify(d.Mem)
		q.Pop(d.Mem)
		d.AddChain(nil, []int{1}) // 3 -> 4, avail_event still 2
		if d.NeedsKick() {
			t.Fatal("kick while draining")
		}
		if more, _ := q.EnableNotify(d.Mem); !more {
			t.Fatal("EnableNotify missed the buffer added while draining")
		}
		if d.AvailEvent() != 3 {
			t.Fatalf("avail_event = %d, want 3", d.AvailEvent())
		}
	})
}

// runDevice serves q with the queue core's serve loop (virtio.Loop, the
// one every govm device uses) making an interrupt decision every batch
// chains: each chain's 2-byte request comes back byte-swapped.
func runDevice(t *testing.T, mem *guestmem.Memory, q *virtio.Queue, bell *virtio.Doorbell,
	intr *virtiotest.RecordingInterrupt, stop <-chan struct{}, batch int) {
	srv := &virtio.Server{Mem: mem, Queue: q, Bell: bell, Intr: intr, Stop: stop, Batch: batch}
	l := virtio.Loop{Stop: stop, Sources: []*virtio.Source{{Server: srv, Prompts: true,
		Handle: func(c *virtio.Chain) (uint32, error) {
			var b [2]byte
			c.Reader().Read(b[:])
			c.Writer().Write([]byte{b[1], b[0]})
			return c.Written(), nil
		}}}}
	l.Run()
	if errs := intr.Errors(); len(errs) > 0 {
		t.Error(errs)
	}
}

// TestNoLostNotifications races a driver goroutine adding buffers (kicking
// only when the device asks) against the device loop. A lost kick or a lost
// interrupt leaves one side asleep and the test times out. It runs with each
// interrupt-decision timing a device uses: once per pass (Batch 0), after
// every chain (1: virtio-blk), and every few chains.
func TestNoLostNotifications(t *testing.T) {
	const total = 20000
	type tcase struct {
		name     string
		features uint64
		batch    int
	}
	var cases []tcase
	for _, batch := range []int{0, 1, 3} {
		for _, f := range []tcase{{"flags", 0, 0}, {"event idx", eventIdx, 0}, {"event idx indirect", eventIdx | indirectFeatures, 0}} {
			cases = append(cases, tcase{fmt.Sprintf("%s batch %d", f.name, batch), f.features, batch})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := virtiotest.New(t, memSize, 8)
			intr := virtiotest.NewRecordingInterrupt()
			a := virtiotest.Activation(intr, tc.features, d)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				runDevice(t, a.Mem, a.Queues[0], a.Bells[0], intr, stop, tc.batch)
			}()
			defer func() { close(stop); d.Kick(); wg.Wait() }()

			done := make(chan int, 1)
			go func() {
				completed, added := 0, 0
				deadline := time.After(20 * time.Second)
				for completed < total {
					ch := intr.Changed()
					for _, e := range d.Collect() {
						if e.In[0][0] != byte(e.ID+1) || e.In[0][1] != byte(e.ID) {
							t.Errorf("chain %d: response %v", e.ID, e.In[0])
						}
						completed++
					}
					if completed == total {
						break
					}
					if added < total && d.FreeDescs() >= 2 {
						// BuildChain's t.Fatal would end this goroutine
						// silently; two free descriptors always fit.
						var head uint16
						if tc.features&indirectFeatures != 0 && added%2 == 0 {
							head = d.BuildIndirectChain([][]byte{{0, 0}}, []int{2})
						} else {
							head = d.BuildChain([][]byte{{0, 0}}, []int{2})
						}
						// The request carries its own head, so the
						// response can be checked per chain.
						d.RAM[d.Segment0(head)] = byte(head)
						d.RAM[d.Segment0(head)+1] = byte(head + 1)
						d.PublishAvail(head)
						d.KickIfNeeded()
						added++
						continue
					}
					// Arm the interrupt like virtqueue_enable_cb: set
					// used_event / clear NO_INTERRUPT, barrier, then
					// re-check the used idx before sleeping.
					d.SetUsedEvent(d.UsedIdx())
					guestmem.Fence()
					if d.UsedIdx() != d.LastUsed() {
						continue
					}
					select {
					case <-ch:
					case <-deadline:
						t.Logf("stuck: added %d completed %d free %d avail %d used %d lastUsed %d availEvent %d usedFlags %d",
							added, completed, d.FreeDescs(), d.AvailIdx(), d.UsedIdx(), d.LastUsed(), d.AvailEvent(), d.UsedFlags())
						done <- completed
						return
					}
				}
				done <- completed
			}()
			if got := <-done; got != total {
				t.Fatalf("completed %d of %d chains: lost notification", got, total)
			}
		})
	}
}

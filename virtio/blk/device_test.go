package virtioblk

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		be   Backend
		cfg  Config
		ok   bool
	}{
		{"good", &memBackend{data: make([]byte, 4096)}, Config{Serial: "x"}, true},
		{"nil", nil, Config{}, false},
		{"smaller than a sector", &memBackend{data: make([]byte, 100)}, Config{}, false},
		{"size error", &memBackend{data: make([]byte, 4096), failSz: true}, Config{}, false},
		{"serial too long", &memBackend{data: make([]byte, 4096)}, Config{Serial: "012345678901234567890"}, false},
	}
	for _, tt := range tests {
		_, err := New(tt.be, tt.cfg)
		if (err == nil) != tt.ok {
			t.Errorf("%s: New error %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestFeaturesAndConfig(t *testing.T) {
	be := &memBackend{data: make([]byte, 3000*SectorSize+100)} // partial sector dropped
	for _, ro := range []bool{false, true} {
		d, err := New(be, Config{ReadOnly: ro})
		if err != nil {
			t.Fatal(err)
		}
		f := d.Features()
		for _, b := range []uint{FeatureSizeMax, FeatureSegMax, FeatureGeometry, FeatureBlkSize, FeatureFlush,
			virtio.FeatureRingIndirectDesc, virtio.FeatureRingEventIdx, virtio.FeatureNotifyOnEmpty} {
			if f&virtio.Bit(b) == 0 {
				t.Errorf("feature %d not offered", b)
			}
		}
		if (f&virtio.Bit(FeatureRO) != 0) != ro || f&virtio.Bit(virtio.FeatureVersion1) != 0 {
			t.Errorf("ro=%v: features %#x", ro, f)
		}
		if d.Type() != virtio.DeviceBlk || len(d.QueueMaxSizes()) != 1 || d.QueueMaxSizes()[0] != QueueSize {
			t.Errorf("type %d queues %v", d.Type(), d.QueueMaxSizes())
		}
	}
	// Withheld bits (govm run --disk ...,event-idx=off) are not offered.
	off := virtio.Bit(virtio.FeatureRingEventIdx) | virtio.Bit(virtio.FeatureRingIndirectDesc)
	all, _ := New(be, Config{})
	w, _ := New(be, Config{Withhold: off})
	if w.Features() != all.Features()&^off {
		t.Errorf("withholding %#x: features %#x, want %#x", off, w.Features(), all.Features()&^off)
	}
	d, _ := New(be, Config{})
	cfg := make([]byte, 32)
	for i := range cfg {
		cfg[i] = 0xee
	}
	d.ReadConfig(0, cfg)
	le := binary.LittleEndian
	if le.Uint64(cfg[0:]) != 3000 || le.Uint32(cfg[8:]) != SizeMax || le.Uint32(cfg[12:]) != SegMax ||
		le.Uint16(cfg[16:]) != 2 || cfg[18] != 16 || cfg[19] != 63 || le.Uint32(cfg[20:]) != 512 {
		t.Fatalf("config space % x", cfg)
	}
	for _, b := range cfg[24:] {
		if b != 0 {
			t.Fatalf("bytes past the config read %#x", b)
		}
	}
	// Partial and odd-offset reads, as a legacy driver does byte-wise.
	one := make([]byte, 1)
	d.ReadConfig(1, one)
	if one[0] != 3000>>8 {
		t.Fatalf("byte 1 = %#x", one[0])
	}
	d.ReadConfig(^uint64(0), one)
	if one[0] != 0 {
		t.Fatal("read at huge offset not zero")
	}
	d.WriteConfig(0, []byte{1, 2, 3, 4})
	d.ReadConfig(0, cfg[:8])
	if le.Uint64(cfg) != 3000 {
		t.Fatal("config write changed capacity")
	}
}

// TestMalformedStopsQueue: framing that leaves no way to answer is guest
// misbehaviour: DeviceError with a GuestError, and the queue serves nothing
// more until reset.
func TestMalformedStopsQueue(t *testing.T) {
	tests := []struct {
		name string
		add  func(d *virtiotest.Driver)
		kind error
		msg  string // the exact text govm logs
	}{
		{"short header", func(d *virtiotest.Driver) { d.AddChain([][]byte{make([]byte, 8)}, []int{1}) }, ErrBadRequest,
			"virtio: queue 0 head 0: virtioblk: malformed request: header of 8 bytes, want 16"},
		{"header split short", func(d *virtiotest.Driver) {
			d.AddChain([][]byte{make([]byte, 8), make([]byte, 7)}, []int{SectorSize + 1})
		}, ErrBadRequest, "virtio: queue 0 head 0: virtioblk: malformed request: header of 15 bytes, want 16"},
		{"no status byte", func(d *virtiotest.Driver) { d.AddChain([][]byte{header(TypeFlush, 0)}, nil) }, ErrBadRequest,
			"virtio: queue 0 head 0: virtioblk: malformed request: no device-writable status byte"},
		{"no readable part", func(d *virtiotest.Driver) { d.AddChain(nil, []int{17}) }, ErrBadRequest,
			"virtio: queue 0 head 0: virtioblk: malformed request: header of 0 bytes, want 16"},
		{"descriptor loop", func(d *virtiotest.Driver) {
			d.SetDesc(0, 0x80000, 16, virtio.DescFlagNext, 0)
			d.PublishAvail(0)
		}, virtio.ErrDescLoop, ""},
		{"avail jump", func(d *virtiotest.Driver) { d.SetAvailIdx(QueueSize + 5) }, virtio.ErrAvailIdx, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{}, 0)
			tt.add(e.d)
			e.d.Kick()
			if !e.intr.WaitFor(5*time.Second, func() bool { return len(e.intr.Errors()) > 0 }) {
				t.Fatal("no DeviceError")
			}
			err := e.intr.Errors()[0]
			var ge *virtio.GuestError
			if !errors.As(err, &ge) || !errors.Is(err, tt.kind) {
				t.Fatalf("DeviceError(%v), want GuestError %v", err, tt.kind)
			}
			if tt.msg != "" && err.Error() != tt.msg {
				t.Fatalf("DeviceError says\n\t%q\nwant\n\t%q", err, tt.msg)
			}
			used := e.d.UsedIdx()
			e.d.AddChain([][]byte{header(TypeFlush, 0)}, []int{1})
			e.d.Kick()
			if e.d.WaitUsedIdx(used+1, 50*time.Millisecond) {
				t.Fatal("stopped queue served a request")
			}
			if _, _, s := e.be.counts(); s != 0 {
				t.Fatal("backend touched after the error")
			}
		})
	}
}

// TestInterruptSuppression: the device asks the queue core, so the
// driver's NO_INTERRUPT flag and used_event are honoured. Reset waits for
// the I/O goroutine, which always finishes its NeedsInterrupt call first,
// so the count is final then.
func TestInterruptSuppression(t *testing.T) {
	evt := virtio.Bit(virtio.FeatureRingEventIdx)
	tests := []struct {
		name      string
		features  uint64
		flags     uint16
		usedEvent uint16
		want      int
	}{
		{"default", 0, 0, 0, 1},
		{"no_interrupt", 0, virtio.AvailFlagNoInterrupt, 0, 0},
		{"used_event reached", evt, 0, 0, 1},
		{"used_event far", evt, 0, 50, 0},
		{"no_interrupt ignored with event idx", evt, virtio.AvailFlagNoInterrupt, 0, 1},
		{"notify on empty overrides", virtio.Bit(virtio.FeatureNotifyOnEmpty), virtio.AvailFlagNoInterrupt, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{}, tt.features)
			e.d.SetAvailFlags(tt.flags)
			e.d.SetUsedEvent(tt.usedEvent)
			e.do([][]byte{header(TypeIn, 1)}, []int{SectorSize, 1})
			e.dev.Reset()
			if got := e.intr.Used(0); got != tt.want {
				t.Fatalf("%d interrupts, want %d", got, tt.want)
			}
		})
	}
}

// TestBatchOneKick: many requests published together, one kick, all done;
// with EVENT_IDX the driver is asked for no further kick meanwhile.
func TestBatchOneKick(t *testing.T) {
	e := newEnv(t, Config{}, virtio.Bit(virtio.FeatureRingIndirectDesc)|virtio.Bit(virtio.FeatureRingEventIdx))
	var heads []uint16
	for i := 0; i < 100; i++ {
		heads = append(heads, e.d.BuildIndirectChain([][]byte{header(TypeIn, uint64(i%diskSectors))}, []int{SectorSize, 1}))
	}
	e.d.PublishAvail(heads...)
	if !e.d.KickIfNeeded() {
		t.Fatal("first batch not kicked")
	}
	if !e.d.WaitUsedIdx(100, 5*time.Second) {
		t.Fatalf("only %d of 100 completed", e.d.UsedIdx())
	}
	for _, u := range e.d.Collect() {
		if status(u) != StatusOK {
			t.Fatalf("head %d status %d", u.ID, status(u))
		}
	}
	// Asleep, it has asked for a kick at the next request, and none
	// before (avail_event moves only when the loop asks for kicks).
	if !e.d.WaitSleeping(5 * time.Second) {
		t.Fatal("the device never slept")
	}
	if e.d.AvailEvent() != 100 {
		t.Fatalf("avail_event %d after draining 100", e.d.AvailEvent())
	}
}

func TestResetStopsAndReactivates(t *testing.T) {
	e := newEnv(t, Config{}, 0)
	e.do([][]byte{header(TypeFlush, 0)}, []int{1})
	e.dev.Reset()
	e.dev.Reset() // idempotent
	used := e.d.UsedIdx()
	e.d.AddChain([][]byte{header(TypeFlush, 0)}, []int{1})
	e.d.Kick()
	if e.d.WaitUsedIdx(used+1, 50*time.Millisecond) {
		t.Fatal("reset device served a request")
	}
	// Activation serves what was published before DRIVER_OK.
	a := virtiotest.Activation(e.intr, 0, e.d)
	if err := e.dev.Activate(a); err != nil {
		t.Fatal(err)
	}
	if err := e.dev.Activate(a); !errors.Is(err, virtio.ErrActive) {
		t.Fatalf("second Activate = %v", err)
	}
	if !e.d.WaitUsedIdx(used+1, 5*time.Second) {
		t.Fatal("request published before activation not served")
	}
	if err := e.dev.Activate(virtio.Activation{}); !errors.Is(err, ErrBadActivation) {
		t.Fatalf("empty activation = %v", err)
	}
}

// heldBackend is a memBackend whose second read waits until release is
// closed: a request the device is still executing.
type heldBackend struct {
	*memBackend
	release chan struct{}
	n       int // reads started; only the device goroutine reads
}

func (b *heldBackend) ReadAt(p []byte, off int64) (int, error) {
	if b.n++; b.n == 2 {
		<-b.release
	}
	return b.memBackend.ReadAt(p, off)
}

// heldPair activates a device over a heldBackend with features and
// publishes two reads in one turn, the second held in the backend; the
// returned function releases it (also at cleanup, before Reset).
func heldPair(t *testing.T, features uint64) (*env, func()) {
	be := &heldBackend{memBackend: &memBackend{data: pattern(diskSectors)}, release: make(chan struct{})}
	e := newEnvBackend(t, be, Config{}, features)
	released := false
	release := func() {
		if !released {
			released = true
			close(be.release)
		}
	}
	t.Cleanup(release)
	e.d.SetUsedEvent(0)
	a := e.d.BuildChain([][]byte{header(TypeIn, 1)}, []int{SectorSize, 1})
	b := e.d.BuildChain([][]byte{header(TypeIn, 2)}, []int{SectorSize, 1})
	e.d.PublishAvail(a, b)
	e.d.Kick()
	return e, release
}

// TestInterruptAtFirstCompletion: with EVENT_IDX, two requests in one turn
// and the driver waiting for the first (used_event 0), the device
// interrupts as soon as the first is used, while it still executes the
// second. Deciding only once per turn would hold the first completion back
// until the second is done: the guest's handler, which is emulated on our
// hosts, and its refill would then never overlap the device's work.
func TestInterruptAtFirstCompletion(t *testing.T) {
	e, release := heldPair(t, virtio.Bit(virtio.FeatureRingEventIdx))
	if !e.intr.WaitFor(5*time.Second, func() bool { return e.intr.Used(0) == 1 }) {
		release()
		t.Fatalf("no interrupt for the first request while the second runs (used idx %d)", e.d.UsedIdx())
	}
	if u := e.d.UsedIdx(); u != 1 {
		t.Fatalf("used idx %d at the interrupt, want 1", u)
	}
	release()
	if !e.d.WaitUsedIdx(2, 5*time.Second) {
		t.Fatal("second request not completed")
	}
	// used_event stayed at 0: the second completion is not signalled.
	e.dev.Reset()
	if n := e.intr.Used(0); n != 1 {
		t.Fatalf("%d interrupts, want 1", n)
	}
}

// TestFlagsOneDecisionPerPass: without EVENT_IDX the driver's
// NO_INTERRUPT flag stays clear while it waits, so a decision after each
// request would interrupt for each; the device decides once per pass and
// the two requests of one turn cost one interrupt.
func TestFlagsOneDecisionPerPass(t *testing.T) {
	e, release := heldPair(t, 0)
	release()
	if !e.d.WaitUsedIdx(2, 5*time.Second) {
		t.Fatal("requests not completed")
	}
	e.dev.Reset() // the I/O goroutine's last decision is made
	if n := e.intr.Used(0); n != 1 {
		t.Fatalf("%d interrupts for one pass of two requests, want 1", n)
	}
}

// TestPollMax: Config.PollMax gives the request queue a busy-poll window
// (virtio.Poller), kicks off while it watches. A driver that publishes each
// request as soon as the one before is done, and kicks only when the device
// asks (KickIfNeeded), then finds kicks off for some of them: the device
// found them by polling. Without PollMax the device sleeps on its doorbell
// after each request, every request needs its kick and none is polled, and
// a request published without one while it sleeps stays unserved.
func TestPollMax(t *testing.T) {
	for _, max := range []time.Duration{time.Hour, 0} {
		e := newEnv(t, Config{PollMax: max}, 0)
		for i := 0; i < 64; i++ {
			e.do([][]byte{header(TypeIn, uint64(i%diskSectors))}, []int{SectorSize, 1})
		}
		polled := e.d.Queue.Watch().Polled.Load()
		if max > 0 && polled == 0 {
			t.Fatalf("PollMax %v: no request found by polling", max)
		}
		if max > 0 {
			continue
		}
		if polled != 0 {
			t.Fatalf("PollMax 0: polled %d, want 0", polled)
		}
		if !e.d.WaitSleeping(5 * time.Second) {
			t.Fatal("PollMax 0: the device never slept")
		}
		want := e.d.UsedIdx() + 1
		e.d.AddChain([][]byte{header(TypeIn, 1)}, []int{SectorSize, 1}) // no kick
		if e.d.WaitUsedIdx(want, 300*time.Millisecond) {
			t.Fatal("PollMax 0: a request published without a kick to a sleeping device was served")
		}
	}
}

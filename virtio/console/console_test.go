package virtioconsole

import (
	"errors"
	"testing"
	"time"

	"github.com/govm/govm/internal/syncbuf"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// start activates a console on two fresh queues with ring features f.
func start(t *testing.T, f uint64) (*Device, *syncbuf.Buffer, []*virtiotest.Driver, *virtiotest.RecordingInterrupt) {
	t.Helper()
	out := &syncbuf.Buffer{}
	d, err := New(out)
	if err != nil {
		t.Fatal(err)
	}
	ds := virtiotest.NewQueues(t, 1<<20, QueueSize, QueueSize)
	intr := virtiotest.NewRecordingInterrupt()
	if err := d.Activate(virtiotest.Activation(intr, f, ds...)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Reset(); d.Close() })
	return d, out, ds, intr
}

// TestOutput: the guest's transmit chains reach the output in order,
// whole, however they are split into buffers, and come back used with
// length 0 (the device writes nothing into them).
func TestOutput(t *testing.T) {
	d, out, ds, _ := start(t, 1<<virtio.FeatureRingEventIdx)
	tx := ds[TXQueue]
	tx.AddChain([][]byte{[]byte("hello, ")}, nil)
	tx.AddChain([][]byte{[]byte("wor"), []byte("ld\n")}, nil)
	tx.Kick()
	if !tx.WaitUsedIdx(2, 5*time.Second) {
		t.Fatalf("used %d of 2", tx.UsedIdx())
	}
	for _, u := range tx.Collect() {
		if u.Len != 0 {
			t.Fatalf("transmit chain used with length %d, want 0", u.Len)
		}
	}
	if got := out.String(); got != "hello, world\n" {
		t.Fatalf("output %q", got)
	}
	if s := d.Stats(); s.Out != 13 {
		t.Fatalf("stats %+v", s)
	}
}

// TestInput: host input waits for the guest's receive buffers and fills
// them in order, each with as much as it holds; input that arrives while
// the device sleeps wakes it; a buffer posted before any input waits.
func TestInput(t *testing.T) {
	d, _, ds, intr := start(t, 0)
	rx := ds[RXQueue]
	rx.AddChain(nil, []int{4})
	rx.Kick()
	// The loop sleeps (TX on its ring, RX on the input eventfd).
	if !ds[TXQueue].WaitSleeping(5 * time.Second) {
		t.Fatal("the loop never slept")
	}
	if rx.UsedIdx() != 0 {
		t.Fatal("a receive buffer was used with no input")
	}
	if n := d.Input([]byte("abcdef")); n != 6 {
		t.Fatalf("Input = %d", n)
	}
	if !rx.WaitUsedIdx(1, 5*time.Second) {
		t.Fatal("input did not reach the posted buffer")
	}
	rx.AddChain(nil, []int{16})
	rx.Kick()
	if !rx.WaitUsedIdx(2, 5*time.Second) {
		t.Fatal("the rest of the input did not reach the second buffer")
	}
	u := rx.Collect()
	if string(u[0].In[0][:u[0].Len]) != "abcd" || string(u[1].In[0][:u[1].Len]) != "ef" {
		t.Fatalf("buffers got %q and %q", u[0].In[0][:u[0].Len], u[1].In[0][:u[1].Len])
	}
	if intr.Used(RXQueue) == 0 {
		t.Fatal("no interrupt for received input")
	}
}

// TestInputBackPressure: Input blocks while inputMax bytes wait for the
// guest, and returns once the guest takes some; Close ends it.
func TestInputBackPressure(t *testing.T) {
	d, _, ds, _ := start(t, 0)
	done := make(chan int)
	go func() { done <- d.Input(make([]byte, inputMax+10)) }()
	select {
	case n := <-done:
		t.Fatalf("Input of more than inputMax returned %d with no guest buffers", n)
	case <-time.After(50 * time.Millisecond):
	}
	ds[RXQueue].AddChain(nil, []int{64})
	ds[RXQueue].Kick()
	select {
	case n := <-done:
		if n != inputMax+10 {
			t.Fatalf("Input = %d", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Input still blocked after the guest took input")
	}
	go func() { done <- d.Input(make([]byte, inputMax)) }()
	time.Sleep(20 * time.Millisecond)
	d.Reset()
	d.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a blocked Input")
	}
}

// TestBadChains: a transmit chain with a device-writable buffer and a
// receive chain with a readable one are guest errors (NEEDS_RESET).
func TestBadChains(t *testing.T) {
	for _, q := range []int{TXQueue, RXQueue} {
		d, _, ds, intr := start(t, 0)
		d.Input([]byte("x"))
		ds[q].AddChain([][]byte{{1}}, []int{1})
		ds[q].Kick()
		if !intr.WaitFor(5*time.Second, func() bool { return len(intr.Errors()) > 0 }) {
			t.Fatalf("queue %d: no device error", q)
		}
		var ge *virtio.GuestError
		if err := intr.Errors()[0]; !errors.As(err, &ge) {
			t.Fatalf("queue %d: device error %v, want a GuestError", q, err)
		}
	}
}

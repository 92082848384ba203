package virtionet

import (
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
	"golang.org/x/sys/unix"
)

// fakeBackend is an in-memory tap: frames queued for the guest are read by
// the device; frames the device writes are recorded, and with loop set
// they are queued back for the guest (a loopback cable).
type fakeBackend struct {
	mu sync.Mutex
	// efd is PollFD: an eventfd kept readable while a frame or a read
	// error is pending (and maybe a little longer: "may be pending").
	efd       int
	toGuest   [][]byte
	fromGuest [][]byte
	loop      bool
	hdrSize   int
	offload   uint
	writeErr  error
	reads     int
	// readErrs are returned by the next TryReadv calls, one each, before
	// any frame: a tap read that fails.
	readErrs []error
	// beforeWrite, if set, runs at the start of each Writev, after the
	// device checked the frame: a second vCPU rewriting guest memory.
	beforeWrite func()
	// onEmpty, if set, runs once, the first time TryReadv finds nothing
	// pending, and its frame is pending after that read: a sender that
	// writes the next frame of a flood just after the reader caught up.
	onEmpty func() []byte
}

func newFake(t testing.TB, loop bool) *fakeBackend {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(efd) })
	return &fakeBackend{loop: loop, efd: efd}
}

// wake makes PollFD readable; mu held.
func (f *fakeBackend) wake() {
	one := [8]byte{1}
	unix.Write(f.efd, one[:])
}

func (f *fakeBackend) PollFD() int { return f.efd }

// injectErr makes the next TryReadv fail with err.
func (f *fakeBackend) injectErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readErrs = append(f.readErrs, err)
	f.wake()
}

// inject queues a frame (header included) for the device to read.
func (f *fakeBackend) inject(frame []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.toGuest = append(f.toGuest, append([]byte(nil), frame...))
	f.wake()
}

func (f *fakeBackend) queued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.toGuest)
}

func (f *fakeBackend) written() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.fromGuest...)
}

func (f *fakeBackend) TryReadv(iovs [][]byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.readErrs) > 0 {
		err := f.readErrs[0]
		f.readErrs = f.readErrs[1:]
		return 0, err
	}
	if len(f.toGuest) == 0 {
		var b [8]byte
		unix.Read(f.efd, b[:]) // nothing pending: not readable
		if f.onEmpty != nil {
			f.toGuest = append(f.toGuest, f.onEmpty())
			f.onEmpty = nil
			f.wake()
		}
		return 0, ErrWouldBlock
	}
	fr := f.toGuest[0]
	f.toGuest = f.toGuest[1:]
	f.reads++
	n := 0
	for _, v := range iovs {
		n += copy(v, fr[n:])
	}
	return len(fr), nil // like tun: the frame's length even if truncated
}

func (f *fakeBackend) Writev(iovs [][]byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.writeErr != nil {
		return 0, f.writeErr
	}
	if f.beforeWrite != nil {
		f.beforeWrite()
	}
	var fr []byte
	for _, v := range iovs {
		fr = append(fr, v...)
	}
	f.fromGuest = append(f.fromGuest, fr)
	if f.loop {
		f.toGuest = append(f.toGuest, fr)
		f.wake()
	}
	return len(fr), nil
}

func (f *fakeBackend) SetVnetHdrSize(n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hdrSize = n
	return nil
}

func (f *fakeBackend) SetOffload(flags uint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offload = flags
	return nil
}

var testMAC = MAC{0x52, 0x54, 0, 1, 2, 3}

// env is a device activated against a fake driver and backend.
type env struct {
	t      *testing.T
	rx, tx *virtiotest.Driver
	intr   *virtiotest.RecordingInterrupt
	dev    *Device
	be     *fakeBackend
	hdr    int
}

func newEnv(t *testing.T, features uint64, loop bool) *env {
	t.Helper()
	return newEnvIntr(t, features, loop, nil)
}

// newEnvIntr is newEnv with the device's Interrupt wrapped by wrap (nil: the
// RecordingInterrupt itself), for tests that look at the rings at the
// moment the device signals.
func newEnvIntr(t *testing.T, features uint64, loop bool, wrap func(*virtiotest.RecordingInterrupt) virtio.Interrupt) *env {
	t.Helper()
	return newEnvConfig(t, features, loop, wrap, Config{MAC: testMAC})
}

// newEnvConfig is newEnvIntr with the device's Config.
func newEnvConfig(t *testing.T, features uint64, loop bool, wrap func(*virtiotest.RecordingInterrupt) virtio.Interrupt, cfg Config) *env {
	t.Helper()
	ds := virtiotest.NewQueues(t, 4<<20, QueueSize, QueueSize)
	be := newFake(t, loop)
	dev, err := New(be, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	intr := virtiotest.NewRecordingInterrupt()
	var di virtio.Interrupt = intr
	if wrap != nil {
		di = wrap(intr)
	}
	if err := dev.Activate(virtiotest.Activation(di, features, ds...)); err != nil {
		t.Fatalf("Activate: %v", err)
	}
	t.Cleanup(dev.Reset)
	return &env{t: t, rx: ds[0], tx: ds[1], intr: intr, dev: dev, be: be, hdr: hdrLen(features)}
}

// frame returns an Ethernet frame of n bytes (n >= 18) carrying seq.
func frame(n int, seq uint32) []byte {
	f := make([]byte, n)
	copy(f, []byte{0x52, 0x54, 0, 1, 2, 3, 0x52, 0x54, 0, 9, 9, 9, 0x88, 0xb5})
	f[14], f[15], f[16], f[17] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
	for i := 18; i < n; i++ {
		f[i] = byte(i) ^ byte(seq)
	}
	return f
}

func seqOf(f []byte) uint32 {
	return uint32(f[14])<<24 | uint32(f[15])<<16 | uint32(f[16])<<8 | uint32(f[17])
}

// waitUsed waits for used idx of d to reach idx.
func (e *env) waitUsed(d *virtiotest.Driver, idx uint16) {
	e.t.Helper()
	if !d.WaitUsedIdx(idx, 2*time.Second) {
		e.t.Fatalf("queue %d: used idx %d, want %d; stats %+v", d.Queue.Index, d.UsedIdx(), idx, e.dev.Stats())
	}
}

// waitTXKicks waits until the device has counted want TX kicks: a kick is
// counted when the device wakes on it, not when the driver sends it.
func (e *env) waitTXKicks(want uint64) {
	e.t.Helper()
	for deadline := time.Now().Add(2 * time.Second); e.tx.Queue.Watch().KicksTaken.Load() < want && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

func feat(bits ...uint) uint64 {
	var f uint64
	for _, b := range bits {
		f |= virtio.Bit(b)
	}
	return f
}

package virtiopci

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestEventFDReadErrorFallsBack: when reading a queue's notify eventfd
// fails while the device is live, the queue does not go deaf. Its
// ioeventfd is removed (so KVM lets the driver's QUEUE_NOTIFY write exit to
// user space, where the register handler kicks), the queue is kicked once
// for a kick the failed read may have eaten, the failure is logged and
// counted, and a later BAR move does not register the dead eventfd again.
// The other queue keeps its ioeventfd.
func TestEventFDReadErrorFallsBack(t *testing.T) {
	fail := make(chan struct{})
	orig := readEventFD
	readEventFD = func(f *os.File, b []byte) (int, error) {
		if strings.HasSuffix(f.Name(), "-notify-1") {
			<-fail
			return 0, unix.EIO
		}
		return orig(f, b)
	}
	defer func() { readEventFD = orig }()

	r := newRig(t)
	reg := &fakeRegistrar{regs: map[regKey]int{}}
	if err := r.d.EnableIOEventFD(reg); err != nil {
		t.Fatal(err)
	}
	defer r.d.Close()
	const base = 0xc000
	r.d.IOBARMapped(base, 32, true)
	_, fds := reg.perQueue(t, 2)

	close(fail) // queue 1's eventfd read fails now
	waitKick(t, r.d.kicks[1])
	deadline := time.Now().Add(5 * time.Second)
	for r.d.Stats().EventFDFailures == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := r.d.Stats().EventFDFailures; n != 1 {
		t.Fatalf("eventfd failures counted %d, want 1", n)
	}
	reg.mu.Lock()
	_, q0 := reg.regs[regKey{base + LegacyQueueNotify, 0}]
	_, q1 := reg.regs[regKey{base + LegacyQueueNotify, 1}]
	reg.mu.Unlock()
	if !q0 || q1 {
		t.Fatalf("registrations after queue 1 failed: queue 0 %v, queue 1 %v; want true, false", q0, q1)
	}
	if r.log.n() == 0 {
		t.Error("failure not logged")
	}
	// Queue 1's kicks now come as port writes.
	r.wr(LegacyQueueNotify, 2, 1)
	waitKick(t, r.d.kicks[1])
	// Queue 0 still kicks through its eventfd.
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	if _, err := unix.Write(fds[0], one[:]); err != nil {
		t.Fatal(err)
	}
	waitKick(t, r.d.kicks[0])
	// A BAR move re-registers queue 0 only.
	r.d.IOBARMapped(0x7000, 32, true)
	reg.mu.Lock()
	n := len(reg.regs)
	_, q0 = reg.regs[regKey{0x7000 + LegacyQueueNotify, 0}]
	reg.mu.Unlock()
	if n != 1 || !q0 {
		t.Fatalf("after a BAR move: %d registrations, queue 0 %v; want queue 0 only", n, q0)
	}
	if err := r.d.Close(); err != nil {
		t.Fatal(err)
	}
}

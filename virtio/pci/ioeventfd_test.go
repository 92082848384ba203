package virtiopci

import (
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// signal does what KVM does on the driver's matching OUT to QUEUE_NOTIFY:
// add 1 to the eventfd's counter.
func signal(t *testing.T, fd int) {
	t.Helper()
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	if _, err := unix.Write(fd, one[:]); err != nil {
		t.Fatal(err)
	}
}

// TestEventFDReadErrorFallsBack: when the device's read of its queue's
// doorbell eventfd fails, the queue does not go deaf. The device wakes (a
// kick may have been lost with the failed read), the queue's ioeventfd is
// removed (so KVM lets the driver's QUEUE_NOTIFY write exit to user space,
// where the register handler rings the doorbell, which now carries rings
// over a channel), the failure is logged and counted, and a later BAR move
// does not register the dead eventfd again. The other queue keeps its
// ioeventfd.
func TestEventFDReadErrorFallsBack(t *testing.T) {
	r := newRig(t)
	reg := &fakeRegistrar{regs: map[regKey]int{}}
	if err := r.d.EnableIOEventFD(reg); err != nil {
		t.Fatal(err)
	}
	const base = 0xc000
	r.d.IOBARMapped(base, 32, true)
	_, fds := reg.perQueue(t, 2)

	// Queue 1's eventfd goes bad under its device: /dev/null polls
	// readable and reads 0 bytes, where an eventfd read gives 8.
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(null)
	if err := unix.Dup3(null, fds[1], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	woke := make(chan struct{})
	go func() { r.d.bells[1].Wait(); close(woke) }() // the device asleep
	select {
	case <-woke:
	case <-time.After(5 * time.Second):
		t.Fatal("the device did not wake when its doorbell failed")
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
	// Queue 1's kicks now come as port writes and still wake the device.
	woke = make(chan struct{})
	go func() { r.d.bells[1].Wait(); close(woke) }()
	r.wr(LegacyQueueNotify, 2, 1)
	select {
	case <-woke:
	case <-time.After(5 * time.Second):
		t.Fatal("a port-write kick did not wake the device after the fallback")
	}
	// Queue 0 still kicks through its eventfd.
	signal(t, fds[0])
	waitKick(t, r.d.bells[0])
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

// TestEventFDKickFaults: GOVM_FAULTS drop-kick and delay-kick apply to
// kicks that come through the ioeventfd too (the device takes them from
// its doorbell without a port exit): the Nth is lost, the next one wakes
// the device; a delayed one wakes it only later.
func TestEventFDKickFaults(t *testing.T) {
	rig := func(f Faults) (*rig, []int) {
		r := newRig(t)
		r.d.SetFaults(f)
		reg := &fakeRegistrar{regs: map[regKey]int{}}
		if err := r.d.EnableIOEventFD(reg); err != nil {
			t.Fatal(err)
		}
		r.d.IOBARMapped(0xc000, 32, true)
		_, fds := reg.perQueue(t, 2)
		return r, fds
	}
	r, fds := rig(Faults{DelayKick: time.Hour})
	signal(t, fds[1])
	if r.kicked(1) {
		t.Fatal("an eventfd kick delayed by an hour reached the device at once")
	}
	r, fds = rig(Faults{DelayKick: time.Millisecond})
	signal(t, fds[1])
	waitKick(t, r.d.bells[1])

	r, fds = rig(Faults{DropKick: 1})
	signal(t, fds[0])
	if r.kicked(0) {
		t.Fatal("the first eventfd kick was not dropped")
	}
	signal(t, fds[0])
	if !r.kicked(0) {
		t.Fatal("the second eventfd kick was dropped too")
	}
	if s := r.d.Stats().Queues[0]; s.KicksEventFD != 2 || s.KicksPort != 0 {
		t.Fatalf("queue 0 counted %d eventfd and %d port kicks, want 2 and 0", s.KicksEventFD, s.KicksPort)
	}
}

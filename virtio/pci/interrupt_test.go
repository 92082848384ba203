package virtiopci

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/govm/govm/iobus"
	"github.com/govm/govm/pci"
	"golang.org/x/sys/unix"
)

func TestISR(t *testing.T) {
	r := newRig(t)
	steps := []struct {
		name       string
		do         func()
		readISR    bool
		wantISR    uint8 // ISR after the step (or value read, if readISR)
		wantLevels []bool
	}{
		{"used raises", func() { r.d.SignalUsed(0) }, false, ISRQueue, []bool{true}},
		{"second used: no second raise", func() { r.d.SignalUsed(1) }, false, ISRQueue, []bool{true}},
		{"config adds bit 1 without raise", func() { r.d.SignalConfig() }, false, ISRQueue | ISRConfig, []bool{true}},
		{"read returns both and lowers", nil, true, ISRQueue | ISRConfig, []bool{true, false}},
		{"second read returns 0, line untouched", nil, true, 0, []bool{true, false}},
		{"config alone raises", func() { r.d.SignalConfig() }, false, ISRConfig, []bool{true, false, true}},
		{"read clears", nil, true, ISRConfig, []bool{true, false, true, false}},
	}
	for _, s := range steps {
		var got uint8
		if s.readISR {
			got = uint8(r.rd(LegacyISR, 1))
		} else {
			s.do()
			got = r.isrLevel()
		}
		if got != s.wantISR {
			t.Fatalf("%s: ISR %#x, want %#x", s.name, got, s.wantISR)
		}
		if r.line.count() != len(s.wantLevels) {
			t.Fatalf("%s: line levels %v, want %v", s.name, r.line.levels, s.wantLevels)
		}
		for i, l := range s.wantLevels {
			if r.line.levels[i] != l {
				t.Fatalf("%s: line levels %v, want %v", s.name, r.line.levels, s.wantLevels)
			}
		}
		r.checkLine(t)
	}
}

func TestLineFailure(t *testing.T) {
	r := newRig(t)
	r.line.fail = true
	if err := r.d.SignalUsed(0); !errors.Is(err, errLine) {
		t.Fatalf("SignalUsed = %v, want the line error", err)
	}
	if r.isrLevel() != 0 {
		t.Fatal("ISR set although the line could not be raised")
	}
	r.line.fail = false
	if err := r.d.SignalUsed(0); err != nil || !r.line.level() {
		t.Fatalf("retry: %v, line %v", err, r.line.level())
	}
	r.checkLine(t)
}

// TestISRConcurrent races device goroutines signalling against a vCPU
// reading the ISR. No signal may be lost: after the signallers stop, either
// the last read saw a bit or the ISR still holds one with the line high.
func TestISRConcurrent(t *testing.T) {
	r := newRig(t)
	const signallers, rounds = 4, 2000
	var wg sync.WaitGroup
	for g := 0; g < signallers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				if err := r.d.SignalUsed(0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	reads := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				reads <- n
				return
			default:
			}
			if r.rd(LegacyISR, 1) != 0 {
				n++
			}
		}
	}()
	wg.Wait()
	close(stop)
	n := <-reads
	r.checkLine(t)
	if n == 0 && r.isrLevel() == 0 {
		t.Fatal("signals lost: no read saw the ISR and it is clear")
	}
	// Levels must alternate: never two raises or two lowers in a row.
	for i := 1; i < len(r.line.levels); i++ {
		if r.line.levels[i] == r.line.levels[i-1] {
			t.Fatalf("line driven to %v twice in a row at %d", r.line.levels[i], i)
		}
	}
}

// regKey is one ioeventfd registration: a port and the value it matches.
type regKey struct {
	addr uint64
	data uint64
}

// fakeRegistrar records ioeventfd registrations by port and matched value.
type fakeRegistrar struct {
	mu   sync.Mutex
	regs map[regKey]int // -> fd
}

func (f *fakeRegistrar) RegisterIOEventFDMatch(addr uint64, length uint32, fd int, pio bool, data uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if length != 2 || !pio {
		return errors.New("want 2-byte PIO")
	}
	k := regKey{addr, data}
	if _, ok := f.regs[k]; ok {
		return unix.EEXIST
	}
	f.regs[k] = fd
	return nil
}

func (f *fakeRegistrar) UnregisterIOEventFDMatch(addr uint64, length uint32, fd int, pio bool, data uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := regKey{addr, data}
	if f.regs[k] != fd {
		return unix.ENOENT
	}
	delete(f.regs, k)
	return nil
}

// perQueue returns the one port all registrations share and the eventfd of
// each queue, failing unless there is exactly one per queue.
func (f *fakeRegistrar) perQueue(t *testing.T, queues int) (uint64, []int) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.regs) != queues {
		t.Fatalf("registrations %v, want one per queue (%d)", f.regs, queues)
	}
	fds := make([]int, queues)
	var addr uint64
	for k, fd := range f.regs {
		if addr != 0 && k.addr != addr {
			t.Fatalf("registrations on two ports: %v", f.regs)
		}
		addr = k.addr
		if k.data >= uint64(queues) {
			t.Fatalf("registration matches %d: no such queue", k.data)
		}
		fds[k.data] = fd
	}
	return addr, fds
}

// TestPCIBusWiring plugs the transport into a pci.Bus on an iobus as the
// VMM does, drives it through the ports, and checks the ioeventfd follows
// BAR0.
func TestPCIBusWiring(t *testing.T) {
	r := newRig(t)
	reg := &fakeRegistrar{regs: map[regKey]int{}}
	if err := r.d.EnableIOEventFD(reg); err != nil {
		t.Fatal(err)
	}
	defer r.d.Close()
	if len(reg.regs) != 0 {
		t.Fatal("registered before the BAR is mapped")
	}
	io := &iobus.Bus{}
	bus, err := pci.NewBus(io, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.Add(2, r.d); err != nil {
		t.Fatal(err)
	}
	base := pci.SlotIOBase(2)
	if port, ok := r.d.NotifyAddr(); !ok || port != base+LegacyQueueNotify {
		t.Fatalf("NotifyAddr = %#x %v", port, ok)
	}
	nq := len(r.d.bells)
	addr, fds := reg.perQueue(t, nq)
	if addr != uint64(base)+LegacyQueueNotify {
		t.Fatalf("ioeventfd at %#x, want %#x", addr, base+LegacyQueueNotify)
	}
	// What KVM does on an OUT of 1 to QUEUE_NOTIFY (datamatch 1): add 1 to
	// queue 1's eventfd counter. Only queue 1 is kicked.
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	if _, err := unix.Write(fds[1], one[:]); err != nil {
		t.Fatal(err)
	}
	if !r.kicked(1) {
		t.Fatal("queue 1's eventfd signal did not ring its doorbell")
	}
	if r.kicked(0) {
		t.Fatal("queue 0 kicked by queue 1's eventfd")
	}
	if s := r.d.Stats(); s.KicksEventFD != 1 || s.Queues[1].KicksEventFD != 1 || s.KicksPort != 0 {
		t.Fatalf("eventfd kicks %d (queue 1: %d), port kicks %d; want 1, 1, 0", s.KicksEventFD, s.Queues[1].KicksEventFD, s.KicksPort)
	}

	// Through the ports: the guest reads the device ID and BAR0 registers.
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, 1<<31|2<<11)
	io.Write(pci.ConfigAddrPort, b)
	io.Read(pci.ConfigDataPort, b)
	if got := binary.LittleEndian.Uint32(b); got != 0x1000<<16|PCIVendor {
		t.Fatalf("config ID %#x", got)
	}
	io.Read(base+LegacyQueueSize, b[:2])
	if got := binary.LittleEndian.Uint16(b); got != 16 {
		t.Fatalf("queue size through the port bus: %d", got)
	}

	// The guest moves BAR0: the ioeventfd moves with it.
	binary.LittleEndian.PutUint32(b, 1<<31|2<<11|pci.OffBAR0)
	io.Write(pci.ConfigAddrPort, b)
	binary.LittleEndian.PutUint32(b, 0x7000)
	io.Write(pci.ConfigDataPort, b)
	if addr, _ := reg.perQueue(t, nq); addr != 0x7000+LegacyQueueNotify {
		t.Fatalf("after move: ioeventfd at %#x", addr)
	}
	// I/O decoding off: no ioeventfd.
	binary.LittleEndian.PutUint32(b, 1<<31|2<<11|pci.OffCommand)
	io.Write(pci.ConfigAddrPort, b)
	io.Write(pci.ConfigDataPort, []byte{0, 0, 0, 0})
	if len(reg.regs) != 0 {
		t.Fatalf("ioeventfd left registered with I/O off: %v", reg.regs)
	}
	if _, ok := r.d.NotifyAddr(); ok {
		t.Fatal("NotifyAddr ok while not decoded")
	}
	io.Write(pci.ConfigDataPort, []byte{pci.CommandIO, 0, 0, 0})
	reg.perQueue(t, nq)
	if err := r.d.EnableIOEventFD(reg); !errors.Is(err, ErrIOEventFDEnabled) {
		t.Fatalf("second enable: %v", err)
	}
	if err := r.d.Close(); err != nil {
		t.Fatal(err)
	}
	if len(reg.regs) != 0 {
		t.Fatalf("Close left %v registered", reg.regs)
	}
}

package vmm

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	virtiopci "github.com/govm/govm/virtio/pci"
)

// events records what teardown did, in order.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, fmt.Sprintf(format, args...))
}

func (e *events) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.log)
}

// fakeDevice is a one-queue virtio device that records its resets and
// whether guest RAM was still mapped at the time.
type fakeDevice struct {
	name   string
	ev     *events
	m      *Machine
	resets int
}

func (f *fakeDevice) Type() virtio.DeviceType          { return virtio.DeviceBlk }
func (f *fakeDevice) Features() uint64                 { return 0 }
func (f *fakeDevice) QueueMaxSizes() []uint16          { return []uint16{16} }
func (f *fakeDevice) ReadConfig(uint64, []byte)        {}
func (f *fakeDevice) WriteConfig(uint64, []byte)       {}
func (f *fakeDevice) Activate(virtio.Activation) error { return nil }
func (f *fakeDevice) Reset() {
	f.resets++
	f.ev.add("%s: device reset, RAM mapped %v, paused %v", f.name, f.m.ram != nil && f.m.ram.host != nil, f.m.gate.Closed())
}

// fakeLine is the device's INTx line.
type fakeLine struct {
	name  string
	ev    *events
	level bool
}

func (l *fakeLine) Set(level bool) error {
	l.level = level
	l.ev.add("%s: line %v", l.name, level)
	return nil
}

// fakeRegistrar stands in for the VM's KVM_IOEVENTFD.
type fakeRegistrar struct {
	name string
	ev   *events
}

func (r *fakeRegistrar) RegisterIOEventFDMatch(addr uint64, length uint32, fd int, pio bool, data uint64) error {
	return nil
}

func (r *fakeRegistrar) UnregisterIOEventFDMatch(addr uint64, length uint32, fd int, pio bool, data uint64) error {
	r.ev.add("%s: ioeventfd unregistered", r.name)
	return nil
}

// fakeBackend is the disk image or tap.
type fakeBackend struct {
	name string
	ev   *events
}

func (b *fakeBackend) Close() error {
	b.ev.add("%s: backend closed", b.name)
	return nil
}

// plugFake gives m a running fake device named name in the next slot: its
// transport has an ioeventfd, the driver has set DRIVER_OK and the device
// has raised its line.
func plugFake(t *testing.T, m *Machine, mem *guestmem.Memory, ev *events, name string) (*virtiopci.Transport, *fakeDevice, *fakeLine) {
	t.Helper()
	dev := &fakeDevice{name: name, ev: ev, m: m}
	line := &fakeLine{name: name, ev: ev}
	pd, err := virtiopci.New(dev, mem, line, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.EnableIOEventFD(&fakeRegistrar{name: name, ev: ev}); err != nil {
		t.Fatal(err)
	}
	pd.IOBARMapped(0xc000, 0x100, true)
	wr := func(off uint16, v uint32, n int) {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], v)
		pd.BARIO().Write(off, b[:n])
	}
	wr(virtiopci.LegacyQueueSelect, 0, 2)
	wr(virtiopci.LegacyQueuePFN, 1, 4)
	wr(virtiopci.LegacyStatus, virtiopci.StatusAcknowledge|virtiopci.StatusDriver|virtiopci.StatusDriverOK, 1)
	if err := pd.SignalUsed(0); err != nil {
		t.Fatal(err)
	}
	if s := pd.Status(); s&virtiopci.StatusDriverOK == 0 || !line.level {
		t.Fatalf("%s: status %#x line %v: the fake did not come up", name, s, line.level)
	}
	m.slots = append(m.slots, pciSlot{dev: pd, backend: &fakeBackend{name: name, ev: ev}, what: name})
	return pd, dev, line
}

func newTeardownMachine(t *testing.T) (*Machine, *guestmem.Memory) {
	t.Helper()
	r, err := allocRAM(minMemSize)
	if err != nil {
		t.Fatal(err)
	}
	return &Machine{ram: r, done: make(chan struct{}), control: control{gate: virtio.NewGate()}}, r.mem
}

// TestTeardownOrder: Close restores the console first, then (with a pause's
// hold released) closes each device with its one closer (reset through the transport, which lowers
// the line; transport closed, which unregisters the ioeventfd; backend
// closed), all while guest RAM is still mapped, and frees RAM last.
func TestTeardownOrder(t *testing.T) {
	ev := &events{}
	m, mem := newTeardownMachine(t)
	m.restoreConsole = func() { ev.add("console restored") }
	plugFake(t, m, mem, ev, "disk 0")
	plugFake(t, m, mem, ev, "net 0")
	m.gate.Close() // a paused VM: its devices are held
	before := len(ev.get())

	m.Close()
	got := ev.get()[before:]
	want := []string{"console restored"}
	for _, d := range []string{"disk 0", "net 0"} {
		want = append(want,
			d+": device reset, RAM mapped true, paused false",
			d+": line false",
			d+": ioeventfd unregistered",
			d+": backend closed")
	}
	if !slices.Equal(got, want) {
		t.Fatalf("teardown did\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	if m.ram.host != nil {
		t.Fatal("guest RAM still mapped after Close")
	}
	m.Close() // a second Close does nothing
	if n := len(ev.get()[before:]); n != len(want) {
		t.Fatalf("a second Close did %d more things", n-len(want))
	}
}

// TestCloseResetsThroughTransport: Close resets a running device through
// its transport, exactly once, so the transport's state goes with it: a
// status of 0 for the driver and the INTx line low (a device reset behind
// the transport's back would leave DRIVER_OK and a raised line).
func TestCloseResetsThroughTransport(t *testing.T) {
	ev := &events{}
	m, mem := newTeardownMachine(t)
	pd, dev, line := plugFake(t, m, mem, ev, "disk 0")
	m.Close()
	if dev.resets != 1 {
		t.Fatalf("device reset %d times, want 1", dev.resets)
	}
	if s := pd.Status(); s != 0 || line.level {
		t.Fatalf("after Close: status %#x, line %v; want 0 and low", s, line.level)
	}
}

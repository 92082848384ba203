package pci

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/govm/govm/iobus"
)

// recBAR is a BAR handler that records accesses and reads as 0xA5.
type recBAR struct {
	mu     sync.Mutex
	reads  []uint16
	writes []uint16
}

func (r *recBAR) Read(off uint16, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads = append(r.reads, off)
	fill(data, 0xA5)
}

func (r *recBAR) Write(off uint16, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, off)
}

// listenDev is a Function that also records BARListener calls.
type listenDev struct {
	*Function
	events []string
}

func (l *listenDev) IOBARMapped(base, size uint16, mapped bool) {
	s := "unmap"
	if mapped {
		s = "map"
	}
	l.events = append(l.events, s+":"+hex16(base))
}

func hex16(v uint16) string {
	const d = "0123456789abcdef"
	return string([]byte{d[v>>12], d[v>>8&15], d[v>>4&15], d[v&15]})
}

const (
	testVendor = 0x1AF4
	testDevice = 0x1001
)

func newTestFunction(t testing.TB, bar iobus.Device) *Function {
	t.Helper()
	f, err := NewFunction(Header{
		VendorID: testVendor, DeviceID: testDevice, Class: 0x010000,
		SubsystemVendorID: testVendor, SubsystemID: 2,
		IOBARSize: 0x40, InterruptLine: 11, InterruptPin: 1,
	}, bar)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// newTestBus returns a port bus with a PCI bus on it and one device in slot 3.
func newTestBus(t testing.TB) (*iobus.Bus, *Bus, *listenDev, *recBAR) {
	t.Helper()
	io := &iobus.Bus{}
	b, err := NewBus(io, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	bar := &recBAR{}
	d := &listenDev{Function: newTestFunction(t, bar)}
	if err := b.Add(3, d); err != nil {
		t.Fatal(err)
	}
	return io, b, d, bar
}

func cfgAddr(bus, dev, fn, reg uint32) uint32 {
	return 1<<31 | bus<<16 | dev<<11 | fn<<8 | reg
}

func out32(io *iobus.Bus, port uint16, v uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	io.Write(port, b[:])
}

func in(io *iobus.Bus, port uint16, n int) uint32 {
	b := make([]byte, 4)
	io.Read(port, b[:n])
	return binary.LittleEndian.Uint32(b)
}

// cfgRead32 reads a config dword of slot dev through the ports.
func cfgRead32(io *iobus.Bus, dev, reg uint32) uint32 {
	out32(io, ConfigAddrPort, cfgAddr(0, dev, 0, reg))
	return in(io, ConfigDataPort, 4)
}

func cfgWrite32(io *iobus.Bus, dev, reg, v uint32) {
	out32(io, ConfigAddrPort, cfgAddr(0, dev, 0, reg))
	out32(io, ConfigDataPort, v)
}

func TestConfigAddressRegister(t *testing.T) {
	io, _, _, _ := newTestBus(t)
	out32(io, ConfigAddrPort, 0x80000000)
	if got := in(io, ConfigAddrPort, 4); got != 0x80000000 {
		t.Fatalf("CONFIG_ADDRESS = %#x, want 0x80000000 (Linux type-1 probe)", got)
	}
	out32(io, ConfigAddrPort, 0xFFFFFFFF)
	if got := in(io, ConfigAddrPort, 4); got != addrRWMask {
		t.Fatalf("reserved bits: CONFIG_ADDRESS = %#x, want %#x", got, uint32(addrRWMask))
	}
	// A byte write to 0xCFB (mechanism #2 probe) must not clobber it.
	io.Write(ConfigAddrPort+3, []byte{0})
	if got := in(io, ConfigAddrPort, 4); got != addrRWMask {
		t.Fatalf("after byte write: %#x", got)
	}
	if got := in(io, ConfigAddrPort, 1); got != 0xFF {
		t.Fatalf("byte read of 0xCF8 = %#x, want 0xff", got)
	}
}

func TestConfigDecoding(t *testing.T) {
	io, _, _, _ := newTestBus(t)
	tests := []struct {
		name string
		addr uint32
		port uint16
		n    int
		want uint32
	}{
		{"host bridge id", cfgAddr(0, 0, 0, 0), 0xCFC, 4, HostBridgeDevice<<16 | HostBridgeVendor},
		{"host bridge class", cfgAddr(0, 0, 0, 8), 0xCFC, 4, HostBridgeClass << 8},
		{"device id dword", cfgAddr(0, 3, 0, 0), 0xCFC, 4, testDevice<<16 | testVendor},
		{"device id word at 0xCFE", cfgAddr(0, 3, 0, 0), 0xCFE, 2, testDevice},
		{"vendor high byte at 0xCFD", cfgAddr(0, 3, 0, 0), 0xCFD, 1, testVendor >> 8},
		{"class byte at 0xCFF", cfgAddr(0, 3, 0, 8), 0xCFF, 1, 0x01},
		{"subsystem", cfgAddr(0, 3, 0, 0x2C), 0xCFC, 4, 2<<16 | testVendor},
		{"irq line/pin", cfgAddr(0, 3, 0, 0x3C), 0xCFC, 2, 1<<8 | 11},
		{"header type", cfgAddr(0, 3, 0, 0x0C), 0xCFE, 1, 0},
		{"low address bits ignored", cfgAddr(0, 3, 0, 0) | 3, 0xCFC, 4, testDevice<<16 | testVendor},
		{"beyond header", cfgAddr(0, 3, 0, 0x40), 0xCFC, 4, 0},
		{"enable clear", cfgAddr(0, 3, 0, 0) &^ (1 << 31), 0xCFC, 4, 0xFFFFFFFF},
		{"absent slot", cfgAddr(0, 4, 0, 0), 0xCFC, 4, 0xFFFFFFFF},
		{"absent slot word", cfgAddr(0, 31, 0, 0), 0xCFC, 2, 0xFFFF},
		{"function 1", cfgAddr(0, 3, 1, 0), 0xCFC, 4, 0xFFFFFFFF},
		{"bus 1", cfgAddr(1, 3, 0, 0), 0xCFC, 4, 0xFFFFFFFF},
		{"word crossing dword", cfgAddr(0, 3, 0, 0), 0xCFF, 2, 0xFFFF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out32(io, ConfigAddrPort, tt.addr)
			if got := in(io, tt.port, tt.n); got != tt.want {
				t.Fatalf("got %#x, want %#x", got, tt.want)
			}
		})
	}
}

func TestConfigWriteMask(t *testing.T) {
	io, _, _, _ := newTestBus(t)
	tests := []struct {
		name      string
		reg, val  uint32
		wantAfter uint32
	}{
		{"vendor/device read-only", 0x00, 0x12345678, testDevice<<16 | testVendor},
		{"class/revision read-only", 0x08, 0xFFFFFFFF, 0x01000000},
		{"status read-only, command masked", 0x04, 0xFFFFFFFF, CommandIO | CommandMemory | CommandBusMaster | CommandINTxDisable},
		{"line writable, pin read-only", 0x3C, 0xFFFF_FF05, 1<<8 | 5},
		{"cache line and latency writable", 0x0C, 0xFFFFFFFF, 0xFFFF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgWrite32(io, 3, tt.reg, tt.val)
			if got := cfgRead32(io, 3, tt.reg); got != tt.wantAfter {
				t.Fatalf("reg %#x = %#x, want %#x", tt.reg, got, tt.wantAfter)
			}
		})
	}
	// Byte write through lane 0xCFD lands on offset reg+1.
	out32(io, ConfigAddrPort, cfgAddr(0, 3, 0, 0x0C))
	io.Write(0xCFD, []byte{0x20})
	if got := cfgRead32(io, 3, 0x0C); got != 0x20FF {
		t.Fatalf("latency via 0xCFD: %#x, want 0x20ff", got)
	}
}

func TestPreassignedBAR(t *testing.T) {
	io, _, d, bar := newTestBus(t)
	base := SlotIOBase(3)
	if got := cfgRead32(io, 3, OffBAR0); got != uint32(base)|1 {
		t.Fatalf("BAR0 = %#x, want %#x", got, uint32(base)|1)
	}
	if got := cfgRead32(io, 3, OffCommand) & CommandIO; got == 0 {
		t.Fatal("I/O decoding not enabled by Add")
	}
	if got := in(io, base+0x13, 1); got != 0xA5 {
		t.Fatalf("BAR read = %#x", got)
	}
	if len(bar.reads) != 1 || bar.reads[0] != 0x13 {
		t.Fatalf("BAR handler saw reads %v, want [0x13]", bar.reads)
	}
	if len(d.events) != 1 || d.events[0] != "map:"+hex16(base) {
		t.Fatalf("listener events %v", d.events)
	}
}

func TestBARSizing(t *testing.T) {
	io, _, _, _ := newTestBus(t)
	orig := cfgRead32(io, 3, OffBAR0)
	cfgWrite32(io, 3, OffBAR0, 0xFFFFFFFF)
	if got := cfgRead32(io, 3, OffBAR0); got != ^uint32(0x40-1)|1 {
		t.Fatalf("sizing read-back %#x, want %#x", got, ^uint32(0x40-1)|1)
	}
	// Size as Linux computes it: lowest set bit of the address mask.
	m := cfgRead32(io, 3, OffBAR0) &^ 3
	if size := m & -m; size != 0x40 {
		t.Fatalf("decoded size %#x", size)
	}
	if in(io, uint16(orig&^3), 1) != 0xFF {
		t.Fatal("BAR still decoded at old address while it holds the sizing pattern")
	}
	cfgWrite32(io, 3, OffBAR0, orig)
	if got := cfgRead32(io, 3, OffBAR0); got != orig {
		t.Fatalf("restored BAR0 %#x, want %#x", got, orig)
	}
	if in(io, uint16(orig&^3), 1) != 0xA5 {
		t.Fatal("BAR not decoded after restore")
	}
}

func TestBARMove(t *testing.T) {
	io, _, d, bar := newTestBus(t)
	old := SlotIOBase(3)
	// Unaligned low bits are hard-wired: 0x7013 becomes 0x7000.
	cfgWrite32(io, 3, OffBAR0, 0x7013)
	if got := cfgRead32(io, 3, OffBAR0); got != 0x7001 {
		t.Fatalf("BAR0 = %#x, want 0x7001", got)
	}
	if io.Write(old, []byte{1}) {
		t.Fatal("old range still claimed")
	}
	if !io.Write(0x7004, []byte{1}) {
		t.Fatal("new range not claimed")
	}
	if len(bar.writes) != 1 || bar.writes[0] != 4 {
		t.Fatalf("handler writes %v, want [4]", bar.writes)
	}
	want := []string{"map:" + hex16(old), "unmap:" + hex16(old), "map:7000"}
	if len(d.events) != len(want) {
		t.Fatalf("events %v, want %v", d.events, want)
	}
	for i := range want {
		if d.events[i] != want[i] {
			t.Fatalf("events %v, want %v", d.events, want)
		}
	}
}

func TestBARUnmappable(t *testing.T) {
	io, _, _, _ := newTestBus(t)
	tests := []struct {
		name string
		bar  uint32
	}{
		{"zero means unassigned", 0},
		{"beyond port space", 0x10000},
		{"straddles 64K", 0xFFC0},
		{"over the config ports", 0xCC0}, // 0xCC0-0xCFF overlaps 0xCF8
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgWrite32(io, 3, OffBAR0, tt.bar)
			if io.Read(SlotIOBase(3), make([]byte, 1)) {
				t.Fatal("old range still claimed")
			}
			// The config ports must still work.
			if got := cfgRead32(io, 3, 0); got != testDevice<<16|testVendor {
				t.Fatalf("config ID %#x", got)
			}
			cfgWrite32(io, 3, OffBAR0, uint32(SlotIOBase(3)))
			if !io.Read(SlotIOBase(3), make([]byte, 1)) {
				t.Fatal("BAR not mapped back")
			}
		})
	}
}

func TestIODisable(t *testing.T) {
	io, _, d, _ := newTestBus(t)
	base := SlotIOBase(3)
	cfgWrite32(io, 3, OffCommand, CommandBusMaster)
	if io.Read(base, make([]byte, 1)) {
		t.Fatal("BAR decoded with I/O disabled")
	}
	cfgWrite32(io, 3, OffCommand, CommandBusMaster|CommandIO)
	if !io.Read(base, make([]byte, 1)) {
		t.Fatal("BAR not decoded after I/O re-enabled")
	}
	if n := len(d.events); n != 3 || d.events[1] != "unmap:"+hex16(base) {
		t.Fatalf("events %v", d.events)
	}
}

func TestAddErrors(t *testing.T) {
	io, b, _, _ := newTestBus(t)
	bar := &recBAR{}
	tests := []struct {
		name string
		slot uint8
		want error
	}{
		{"host bridge slot", 0, ErrBadSlot},
		{"slot 32", 32, ErrBadSlot},
		{"occupied", 3, ErrSlotBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := b.Add(tt.slot, newTestFunction(t, bar)); !errors.Is(err, tt.want) {
				t.Fatalf("Add(%d) = %v, want %v", tt.slot, err, tt.want)
			}
		})
	}
	// A port already taken by something else makes Add fail cleanly.
	if err := io.Register(SlotIOBase(5)+8, 1, bar); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(5, newTestFunction(t, bar)); !errors.Is(err, iobus.ErrOverlap) {
		t.Fatalf("Add over taken ports = %v, want ErrOverlap", err)
	}
	if got := cfgRead32(io, 5, 0); got != 0xFFFFFFFF {
		t.Fatalf("failed Add left a device: %#x", got)
	}
}

func TestNewFunctionErrors(t *testing.T) {
	bar := &recBAR{}
	tests := []struct {
		name string
		h    Header
		bar  iobus.Device
	}{
		{"size not power of two", Header{IOBARSize: 0x30}, bar},
		{"size too small", Header{IOBARSize: 2}, bar},
		{"size too big", Header{IOBARSize: 0x200}, bar},
		{"BAR without handler", Header{IOBARSize: 0x40}, nil},
		{"handler without BAR", Header{}, bar},
		{"class too wide", Header{Class: 1 << 24}, nil},
		{"bad pin", Header{InterruptPin: 5}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewFunction(tt.h, tt.bar); !errors.Is(err, ErrBadHeader) {
				t.Fatalf("err = %v, want ErrBadHeader", err)
			}
		})
	}
}

func TestSlotIRQ(t *testing.T) {
	seen := map[uint8]bool{}
	for slot := uint8(0); slot < NumSlots; slot++ {
		irq, ok := SlotIRQ(slot)
		if ok != (slot >= 1 && slot <= 12) {
			t.Fatalf("slot %d: ok %v", slot, ok)
		}
		if !ok {
			continue
		}
		// Never a line the platform uses (timer, i8042, cascade, COM1/2,
		// RTC), never past the IOAPIC's 24 pins, and PIC lines first.
		switch irq {
		case 0, 1, 2, 3, 4, 8, 12, 13, 14, 15:
			t.Fatalf("slot %d gets reserved IRQ %d", slot, irq)
		}
		if irq > 23 || (slot <= 4) != (irq < 16) {
			t.Fatalf("slot %d gets IRQ %d", slot, irq)
		}
		if seen[irq] {
			t.Fatalf("IRQ %d shared", irq)
		}
		seen[irq] = true
	}
}

package pci

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/govm/govm/iobus"
)

// Configuration mechanism #1 ports (PCI 3.0 section 3.2.2.3.2).
const (
	ConfigAddrPort = 0xCF8 // CONFIG_ADDRESS, dword accesses only
	ConfigDataPort = 0xCFC // CONFIG_DATA, 0xCFC-0xCFF, any width inside the dword
	configPorts    = 8
)

// CONFIG_ADDRESS fields.
const (
	addrEnable  = 1 << 31
	addrRWMask  = 0x80FFFFFC // reserved bits 30:24 and 1:0 read back as zero
	addrRegMask = 0xFC
)

// Slots on bus 0. Slot 0 is the host bridge.
const (
	NumSlots = 32
	// IOWindowBase and IOWindowStride define where govm pre-assigns BAR0
	// of the device in slot s: IOWindowBase + s*IOWindowStride. Guests
	// booted without firmware (govm has none; QEMU's qboot assigns no BARs
	// either) find the BARs already programmed and I/O decoding on. 0xC000
	// is where SeaBIOS starts PCI I/O under QEMU, far above ISA/legacy
	// ports (COM, i8042, RTC, 0xCF8, debug-exit 0x501); 32 slots end at
	// 0xDFFF.
	IOWindowBase   = 0xC000
	IOWindowStride = 0x100
)

// Host bridge identity: an Intel 82441FX (i440FX) PMC, the bridge QEMU's
// default machine shows, so guests apply no unusual quirks.
const (
	HostBridgeVendor = 0x8086
	HostBridgeDevice = 0x1237
	HostBridgeClass  = 0x060000 // bridge, host bridge
)

// Errors returned by Bus.
var (
	ErrBadSlot  = errors.New("pci: bad slot")
	ErrSlotBusy = errors.New("pci: slot already occupied")
)

// Device is one single-function PCI device on bus 0. *Function implements
// it; adapters embed a *Function.
type Device interface {
	// ConfigRead and ConfigWrite access the 256-byte configuration space
	// at off; the bus never crosses a dword boundary.
	ConfigRead(off uint8, data []byte)
	ConfigWrite(off uint8, data []byte)
	// IOBAR reports the current BAR0 address, its size (0: no BAR) and
	// whether I/O decoding is enabled. The bus asks after every
	// configuration write and moves the port range to match.
	IOBAR() (base uint32, size uint16, enabled bool)
	// BARIO handles port accesses inside BAR0 (offsets from its base).
	BARIO() iobus.Device
}

// BARListener is implemented by devices that must know where their BAR is
// actually mapped on the port bus, e.g. to move KVM ioeventfds with it.
// The bus calls it (with its lock held: do not call back into the Bus)
// whenever the mapping changes; mapped false means no longer decoded.
type BARListener interface {
	IOBARMapped(base, size uint16, mapped bool)
}

type slot struct {
	dev    Device
	mapped bool
	base   uint16
	size   uint16
}

// Bus is PCI bus 0: a host bridge in slot 0, up to 31 devices, and the
// configuration ports. Safe for concurrent use by several vCPUs.
type Bus struct {
	io   *iobus.Bus
	logf func(format string, args ...any)

	mu      sync.Mutex
	addr    uint32 // CONFIG_ADDRESS
	slots   [NumSlots]*slot
	logLeft int // guest-caused log lines still allowed
}

// NewBus creates bus 0 with its host bridge and claims ports
// 0xCF8-0xCFF on io. logf (may be nil) receives one line per failed BAR
// mapping, up to a limit, since a guest can cause them at will.
func NewBus(io *iobus.Bus, logf func(format string, args ...any)) (*Bus, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	b := &Bus{io: io, logf: logf, logLeft: 16}
	hb, err := NewFunction(Header{VendorID: HostBridgeVendor, DeviceID: HostBridgeDevice, Class: HostBridgeClass}, nil)
	if err != nil {
		return nil, err
	}
	b.slots[0] = &slot{dev: hb}
	if err := io.Register(ConfigAddrPort, configPorts, configIO{b}); err != nil {
		return nil, fmt.Errorf("pci: config ports: %w", err)
	}
	return b, nil
}

// SlotIOBase is the BAR0 address govm pre-assigns to a device in slot.
func SlotIOBase(slot uint8) uint16 {
	return IOWindowBase + uint16(slot)*IOWindowStride
}

// slotIRQs are the IRQs suggested for slots 1-12. The first four are ISA
// lines nothing else on the platform uses (0 timer, 1 i8042, 2 cascade, 3/4
// COM, 6 floppy, 7 LPT, 8 RTC, 12 mouse, 13 FPU, 14/15 IDE are taken or
// conventional), so those devices have a line that works through the PIC
// as well as the IOAPIC; 10 and 11 are also QEMU's PCI link IRQs. The rest
// are the IOAPIC's pins 16-23, which only it has (KVM's default routing
// maps GSI n to pin n, and the MP table tells the guest): a guest using the
// PIC alone cannot take their interrupts, and drives those devices by
// polling, as the test kernel does.
var slotIRQs = [...]uint8{10, 11, 5, 9, 16, 17, 18, 19, 20, 21, 22, 23}

// SlotIRQ suggests the IRQ (IOAPIC pin, and PIC line below 16) for INTA#
// of the device in slot 1-12, and false for other slots. Lines are not shared on purpose:
// each device drives its line with KVM_IRQ_LINE from one user-space source,
// and two devices on one line would lower each other's interrupt.
func SlotIRQ(slot uint8) (uint8, bool) {
	if slot == 0 || int(slot) > len(slotIRQs) {
		return 0, false
	}
	return slotIRQs[slot-1], true
}

// Add plugs dev into slot (1..31), programs BAR0 to SlotIOBase(slot),
// enables I/O decoding and maps the BAR on the port bus, as firmware would.
func (b *Bus) Add(slotNum uint8, dev Device) error {
	if slotNum == 0 || slotNum >= NumSlots {
		return fmt.Errorf("%w: %d (want 1..%d)", ErrBadSlot, slotNum, NumSlots-1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.slots[slotNum] != nil {
		return fmt.Errorf("%w: %d", ErrSlotBusy, slotNum)
	}
	s := &slot{dev: dev}
	if _, size, _ := dev.IOBAR(); size != 0 {
		if size > IOWindowStride {
			return fmt.Errorf("%w: slot %d BAR0 size %#x exceeds the %#x window", ErrBadSlot, slotNum, size, IOWindowStride)
		}
		var buf [4]byte
		binary.LittleEndian.PutUint32(buf[:], uint32(SlotIOBase(slotNum)))
		dev.ConfigWrite(OffBAR0, buf[:])
		dev.ConfigRead(OffCommand, buf[:2])
		cmd := binary.LittleEndian.Uint16(buf[:]) | CommandIO
		binary.LittleEndian.PutUint16(buf[:], cmd)
		dev.ConfigWrite(OffCommand, buf[:2])
		if err := b.remap(s); err != nil {
			return fmt.Errorf("pci: slot %d: %w", slotNum, err)
		}
	}
	b.slots[slotNum] = s
	return nil
}

// remap makes the port bus match what s.dev decodes now. Called with b.mu
// held. A BAR the guest points outside the port space, at 0 (unassigned),
// or over another device's ports is simply not decoded.
func (b *Bus) remap(s *slot) error {
	base32, size, enabled := s.dev.IOBAR()
	want := enabled && size != 0 && base32 != 0 && base32+uint32(size) <= 0x10000
	base := uint16(base32)
	if s.mapped && (!want || base != s.base) {
		b.io.Unregister(s.base)
		s.mapped = false
		if l, ok := s.dev.(BARListener); ok {
			l.IOBARMapped(s.base, s.size, false)
		}
	}
	if !want || s.mapped {
		return nil
	}
	if err := b.io.Register(base, size, s.dev.BARIO()); err != nil {
		return err
	}
	s.mapped, s.base, s.size = true, base, size
	if l, ok := s.dev.(BARListener); ok {
		l.IOBARMapped(base, size, true)
	}
	return nil
}

// target decodes CONFIG_ADDRESS: the device addressed and the register
// (dword-aligned) offset, or nil when nothing answers. Called with b.mu held.
func (b *Bus) target() (*slot, uint8) {
	a := b.addr
	if a&addrEnable == 0 {
		return nil, 0
	}
	bus, dev, fn := (a>>16)&0xFF, (a>>11)&0x1F, (a>>8)&0x7
	// Only bus 0 exists, and every device is single-function (header
	// type bit 7 clear), so functions 1-7 are absent.
	if bus != 0 || fn != 0 {
		return nil, 0
	}
	return b.slots[dev], uint8(a & addrRegMask)
}

// configIO is the iobus handler for 0xCF8-0xCFF; kept separate so Bus does
// not export Read/Write methods that look like something else.
type configIO struct{ b *Bus }

func (c configIO) Read(off uint16, data []byte) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	fill(data, 0xFF)
	switch {
	case off == 0 && len(data) == 4:
		binary.LittleEndian.PutUint32(data, b.addr)
	case off >= 4 && validLane(off-4, len(data)):
		s, reg := b.target()
		if s == nil {
			return // absent: all ones, vendor 0xFFFF
		}
		s.dev.ConfigRead(reg+uint8(off-4), data)
	}
	// Byte/word accesses to 0xCF8-0xCFB are not CONFIG_ADDRESS (PCI 3.0
	// 3.2.2.3.2): they read as all ones, which is also what Linux's
	// mechanism #2 probe expects not to see.
}

func (c configIO) Write(off uint16, data []byte) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case off == 0 && len(data) == 4:
		b.addr = binary.LittleEndian.Uint32(data) & addrRWMask
	case off >= 4 && validLane(off-4, len(data)):
		s, reg := b.target()
		if s == nil {
			return
		}
		s.dev.ConfigWrite(reg+uint8(off-4), data)
		if err := b.remap(s); err != nil && b.logLeft > 0 {
			b.logLeft--
			b.logf("pci: %02x:%02x.0: BAR0 not mapped: %v", 0, (b.addr>>11)&0x1F, err)
		}
	}
}

// validLane reports whether an access of n bytes at byte lane lane (0-3)
// of CONFIG_DATA stays inside the dword; a crossing access is dropped.
func validLane(lane uint16, n int) bool {
	return n > 0 && n <= 4 && int(lane)+n <= 4
}

func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

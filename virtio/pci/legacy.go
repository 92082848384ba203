package virtiopci

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/govm/govm/virtio"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/internal/ratelog"
	"github.com/govm/govm/irq"
	"github.com/govm/govm/pci"
)

// Legacy virtio-PCI register offsets in BAR0, without MSI-X (spec 4.1.4.8
// "Legacy Interfaces: A Note on PCI Device Layout"). All little-endian.
const (
	LegacyHostFeatures  = 0x00 // 32-bit, read-only: device features 0-31
	LegacyGuestFeatures = 0x04 // 32-bit: driver-acknowledged features
	LegacyQueuePFN      = 0x08 // 32-bit: ring address / 4096 of the selected queue
	LegacyQueueSize     = 0x0C // 16-bit, read-only: size of the selected queue
	LegacyQueueSelect   = 0x0E // 16-bit
	LegacyQueueNotify   = 0x10 // 16-bit, write-only: queue index kicked
	LegacyStatus        = 0x12 // 8-bit device status (spec 2.1)
	LegacyISR           = 0x13 // 8-bit, read-to-clear (spec 4.1.4.5)
	LegacyConfig        = 0x14 // device-specific configuration (no MSI-X)
)

// Device status bits (spec 2.1).
const (
	StatusAcknowledge = 0x01
	StatusDriver      = 0x02
	StatusDriverOK    = 0x04
	StatusFeaturesOK  = 0x08 // not used by legacy drivers; honoured if set
	StatusNeedsReset  = 0x40
	StatusFailed      = 0x80
)

// ISR status bits (spec 4.1.4.5.1).
const (
	ISRQueue  = 0x01 // a used buffer notification
	ISRConfig = 0x02 // a configuration change notification
)

// PCIVendor is the virtio PCI vendor ID (spec 4.1.2.1), used for both the
// vendor and the subsystem vendor.
const PCIVendor = 0x1AF4

// legacyIdentity is the transitional PCI device ID and class per device
// type (spec 4.1.2.3 "Legacy Interfaces"). Linux's legacy probe binds
// IDs 0x1000-0x103f with revision 0 and reads the type from the subsystem
// device ID.
var legacyIdentity = map[virtio.DeviceType]struct {
	id    uint16
	class uint32
	name  string
}{
	virtio.DeviceNet:     {0x1000, 0x020000, "virtio-net"},     // network, Ethernet
	virtio.DeviceBlk:     {0x1001, 0x010000, "virtio-blk"},     // mass storage, SCSI
	virtio.DeviceConsole: {0x1003, 0x078000, "virtio-console"}, // simple communication, other
	virtio.DeviceRNG:     {0x1005, 0x00ff00, "virtio-rng"},     // unclassified, as QEMU's
	virtio.Device9P:      {0x1009, 0x018000, "virtio-9p"},      // mass storage, other (QEMU's class)
}

// ErrUnsupportedDevice is returned by New for a device the legacy
// transport cannot present.
var ErrUnsupportedDevice = errors.New("virtio: device not supported by the legacy PCI transport")

// ConfigSizer may be implemented by a Device to size BAR0 to its
// configuration space (LegacyConfig + ConfigSize, rounded up to a power of
// two). Without it BAR0 is 0x100 ports, enough for any device config
// govm has.
type ConfigSizer interface {
	ConfigSize() int
}

// Guest-error log kinds, each logged at most once per device so a hostile
// guest cannot flood the host log.
const (
	logNotifyRange = 1 << iota
	logAccess
	logQueueWhileActive
	logFeaturesLate
	logActivateNeedsReset
	logLineError
)

// Transport is a virtio device behind the legacy virtio-PCI transport: a
// pci.Device (through the embedded *pci.Function) whose BAR0 holds the
// legacy register block, and the virtio.Interrupt its device signals.
type Transport struct {
	*pci.Function

	dev    virtio.Device
	mem    *guestmem.Memory
	line   irq.Line
	logf   func(format string, args ...any)
	name   string
	bells  []*virtio.Doorbell // one per queue, never replaced; closed by Close
	logged atomic.Uint32      // log kinds already emitted
	// guestLog limits guest-error lines per device, across resets.
	guestLog *ratelog.Limiter

	counters  pciCounters     // stats.go
	qcounters []queueCounters // stats.go, one per queue
	// notify takes a port-write notification of a queue (notifyQueue,
	// or the faults' wrapper: faults.go); intr is what the device
	// signals through (the transport itself, or the wrapper).
	notify func(q int)
	intr   virtio.Interrupt

	// mu guards the register state below. It is held across dev.Reset and
	// dev.Activate, so device goroutines must never take it: they use
	// intMu only (through Interrupt).
	mu            sync.Mutex
	queues        []*virtio.Queue
	pfns          []uint32
	guestFeatures uint32
	sel           uint16
	active        bool
	// gate is the machine's pause gate (SetGate); member the device
	// goroutine's place at it while active.
	gate     *virtio.Gate
	gateName string
	member   *virtio.Member

	// intMu guards status and isr, and orders line changes with them.
	// Never held while calling into the device.
	intMu  sync.Mutex
	status uint8
	isr    uint8

	// evMu guards the ioeventfd state (ioeventfd.go).
	evMu      sync.Mutex
	ev        *notifyEventFD
	barBase   uint16
	barMapped bool
}

// New wraps dev in the legacy transport. line is the INTx line
// govm routed to IRQ irqNum (written to the interrupt line register for the
// guest's information). logf (may be nil) receives one line per guest error.
func New(dev virtio.Device, mem *guestmem.Memory, line irq.Line, irqNum uint8, logf func(format string, args ...any)) (*Transport, error) {
	idn, ok := legacyIdentity[dev.Type()]
	if !ok {
		return nil, fmt.Errorf("%w: type %d", ErrUnsupportedDevice, dev.Type())
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	d := &Transport{dev: dev, mem: mem, line: line, logf: logf, name: idn.name,
		guestLog: ratelog.New(logf, 0, 0)}
	for i, n := range dev.QueueMaxSizes() {
		if n == 0 || n&(n-1) != 0 || n > virtio.MaxQueueSize {
			return nil, fmt.Errorf("%w: %s queue %d max size %d", ErrUnsupportedDevice, idn.name, i, n)
		}
		q := virtio.NewQueue(n)
		q.Index = i
		d.queues = append(d.queues, q)
		b, err := virtio.NewDoorbell()
		if err != nil {
			d.closeBells()
			return nil, fmt.Errorf("virtio: %s: %w", idn.name, err)
		}
		b.OnFail = func(err error) { d.bellFailed(i, err) }
		d.bells = append(d.bells, b)
	}
	d.pfns = make([]uint32, len(d.queues))
	d.notify, d.intr = d.notifyQueue, d
	d.qcounters = make([]queueCounters, len(d.queues))
	barSize := uint16(0x100)
	if cs, ok := dev.(ConfigSizer); ok {
		n := LegacyConfig + cs.ConfigSize()
		if n > 0x100 {
			return nil, fmt.Errorf("%w: %s config of %d bytes", ErrUnsupportedDevice, idn.name, cs.ConfigSize())
		}
		for barSize = 0x20; int(barSize) < n; barSize <<= 1 {
		}
	}
	f, err := pci.NewFunction(pci.Header{
		VendorID: PCIVendor, DeviceID: idn.id, Revision: 0, Class: idn.class,
		SubsystemVendorID: PCIVendor, SubsystemID: uint16(dev.Type()),
		IOBARSize: barSize, InterruptLine: irqNum, InterruptPin: 1,
	}, barIO{d})
	if err != nil {
		return nil, fmt.Errorf("virtio: %s: %w", idn.name, err)
	}
	d.Function = f
	return d, nil
}

// barIO is BAR0's port handler; a separate type so Transport itself does not
// grow Read/Write methods that look like something else.
type barIO struct{ d *Transport }

func (b barIO) Read(off uint16, data []byte)  { b.d.readReg(off, data) }
func (b barIO) Write(off uint16, data []byte) { b.d.writeReg(off, data) }

// KickQueue notifies queue q as a QUEUE_NOTIFY write would, without
// blocking: it rings the queue's doorbell, where a kick already pending
// absorbs this one.
func (d *Transport) KickQueue(q int) {
	if q < 0 || q >= len(d.bells) {
		return
	}
	d.bells[q].Ring()
}

// notifyQueue is a driver's port-write notification of queue q (in range):
// counted, then passed to the queue's doorbell.
func (d *Transport) notifyQueue(q int) {
	d.countNotify(q)
	d.KickQueue(q)
}

func (d *Transport) countNotify(q int) {
	d.counters.notifies.Add(1)
	d.qcounters[q].notifies.Add(1)
}

// NumQueues is the number of virtqueues the device has.
func (d *Transport) NumQueues() int { return len(d.queues) }

// SetGate makes the device's goroutine a member of g (govm pause) from its
// next activation on, under name (the machine's name for the device).
func (d *Transport) SetGate(g *virtio.Gate, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gate, d.gateName = g, name
}

// Status returns the device status byte (for diagnostics and tests).
func (d *Transport) Status() uint8 {
	d.intMu.Lock()
	defer d.intMu.Unlock()
	return d.status
}

func (d *Transport) readReg(off uint16, data []byte) {
	clear(data)
	end := int(off) + len(data)
	if off >= LegacyConfig {
		d.dev.ReadConfig(uint64(off-LegacyConfig), data)
		return
	}
	var h [LegacyConfig]byte
	le := binary.LittleEndian
	d.mu.Lock()
	le.PutUint32(h[LegacyHostFeatures:], uint32(d.dev.Features()))
	le.PutUint32(h[LegacyGuestFeatures:], d.guestFeatures)
	// A selector past the last queue reads size 0: that is how a legacy
	// driver learns how many queues exist (Linux setup_vq).
	if int(d.sel) < len(d.queues) {
		le.PutUint32(h[LegacyQueuePFN:], d.pfns[d.sel])
		le.PutUint16(h[LegacyQueueSize:], d.queues[d.sel].MaxSize())
	}
	le.PutUint16(h[LegacyQueueSelect:], d.sel)
	d.mu.Unlock()
	h[LegacyStatus] = d.Status()
	if int(off) <= LegacyISR && end > LegacyISR {
		h[LegacyISR] = d.readISR()
	}
	copy(data, h[off:min(end, LegacyConfig)])
	if end > LegacyConfig {
		d.dev.ReadConfig(0, data[LegacyConfig-int(off):])
	}
}

func (d *Transport) writeReg(off uint16, data []byte) {
	if off >= LegacyConfig {
		d.dev.WriteConfig(uint64(off-LegacyConfig), data)
		return
	}
	var v uint32
	for i := min(len(data), 4) - 1; i >= 0; i-- {
		v = v<<8 | uint32(data[i])
	}
	// Registers are written at their natural width (Linux
	// virtio_pci_legacy.c: iowrite32/16/8); anything else is not a
	// register access a driver makes.
	switch {
	case off == LegacyGuestFeatures && len(data) == 4:
		d.writeFeatures(v)
	case off == LegacyQueuePFN && len(data) == 4:
		d.writePFN(v)
	case off == LegacyQueueSelect && len(data) == 2:
		d.mu.Lock()
		d.sel = uint16(v)
		d.mu.Unlock()
	case off == LegacyQueueNotify && len(data) == 2:
		if int(v) >= len(d.bells) {
			d.logOnce(logNotifyRange, "notify of queue %d, device has %d", v, len(d.bells))
			return
		}
		d.notify(int(v))
	case off == LegacyStatus && len(data) == 1:
		d.writeStatus(uint8(v))
	default:
		d.logOnce(logAccess, "ignored %d-byte write at register %#x", len(data), off)
	}
}

func (d *Transport) writeFeatures(v uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// Spec 2.2.1 / 3.1.1: features are fixed once the driver said
	// FEATURES_OK (or, legacy, DRIVER_OK); a running device cannot change
	// ring formats under its goroutines.
	if d.active || d.Status()&(StatusDriverOK|StatusFeaturesOK) != 0 {
		d.logOnce(logFeaturesLate, "features %#x written after FEATURES_OK/DRIVER_OK: ignored", v)
		return
	}
	// A driver must not accept what was not offered (spec 2.2.1).
	d.guestFeatures = v & uint32(d.dev.Features())
}

// writePFN sets or clears the rings of the selected queue (spec 4.1.4.10).
func (d *Transport) writePFN(pfn uint32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if int(d.sel) >= len(d.queues) {
		d.logOnce(logQueueWhileActive, "PFN write to absent queue %d: ignored", d.sel)
		return
	}
	if d.active {
		// The device goroutines own the queue while running.
		d.logOnce(logQueueWhileActive, "queue %d PFN %#x written while running: ignored", d.sel, pfn)
		return
	}
	q := d.queues[d.sel]
	q.Reset()
	d.pfns[d.sel] = 0
	if pfn == 0 {
		return // the driver releases the queue
	}
	q.Size = q.MaxSize()
	q.DescAddr, q.AvailAddr, q.UsedAddr = virtio.LegacyRingAddrs(pfn, q.Size)
	q.Ready = true
	if err := q.Validate(d.mem); err != nil {
		q.Reset()
		d.guestError(fmt.Errorf("queue %d PFN %#x: %w", d.sel, pfn, err))
		return
	}
	d.pfns[d.sel] = pfn
}

func (d *Transport) writeStatus(v uint8) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if v == 0 {
		d.reset()
		return
	}
	d.intMu.Lock()
	// NEEDS_RESET is the device's to set and only a reset clears it.
	needsReset := d.status & StatusNeedsReset
	d.status = v&^StatusNeedsReset | needsReset
	d.intMu.Unlock()
	if v&StatusDriverOK == 0 || d.active {
		return
	}
	if needsReset != 0 {
		d.logOnce(logActivateNeedsReset, "DRIVER_OK while NEEDS_RESET: not activated")
		return
	}
	d.activate()
}

// activate hands the configured queues to the device (spec 3.1.1 step 8).
// Called with d.mu held.
func (d *Transport) activate() {
	feat := uint64(d.guestFeatures)
	// Queues[i] must be queue i for the device, so the slice stops at the
	// first queue the driver left unconfigured; a device that needs more
	// refuses activation.
	n := 0
	for n < len(d.queues) && d.queues[n].Ready {
		d.queues[n].SetFeatures(feat)
		n++
	}
	member := d.gate.Join(d.gateName)
	err := d.dev.Activate(virtio.Activation{Mem: d.mem, Features: feat, Queues: d.queues[:n], Bells: d.bells[:n:n],
		Intr: d.intr, Member: member})
	if err != nil {
		member.Leave()
		d.guestError(fmt.Errorf("activate with %d queues, features %#x: %w", n, feat, err))
		return
	}
	d.active, d.member = true, member
}

// Reset stops the device and returns the transport to its power-on state,
// exactly as a driver's write of 0 to the status register does: when it
// returns the device's goroutines have stopped, the queues are forgotten,
// the ISR is clear and the interrupt line is low. The VMM calls it on
// teardown; going through the transport (not the device's own Reset)
// serialises it with a vCPU's register accesses, which could otherwise
// activate the device again behind it, and leaves no line high.
func (d *Transport) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reset()
}

// reset is a driver write of 0 to the status register (spec 2.4, 4.1.4.8):
// stop the device, forget every queue, clear the ISR and lower the line.
// Called with d.mu held.
func (d *Transport) reset() {
	d.dev.Reset() // waits for the device goroutines: no Signal* after this
	d.member.Leave()
	d.member = nil
	for i, q := range d.queues {
		q.Reset()
		d.pfns[i] = 0
		// Kicks for the old rings, and the ring the device's Reset
		// woke its goroutine with, must not wake the next activation.
		d.bells[i].Clear()
	}
	d.guestFeatures, d.sel, d.active = 0, 0, false
	d.intMu.Lock()
	defer d.intMu.Unlock()
	d.status = 0
	d.setISRLocked(0)
}

// logOnce logs a guest error of kind at most once per device.
func (d *Transport) logOnce(kind uint32, format string, args ...any) {
	if d.logged.Or(kind)&kind == 0 {
		d.logf(d.name+": guest error: "+format, args...)
	}
}

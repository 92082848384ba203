// Package virtio holds the virtqueue core (split rings, virtio 1.x spec
// section 2.7, legacy layout section 2.7.2 / 4.1.4.10) and the device
// contracts. Devices (virtio/net, virtio/blk) implement Device and never know
// which transport carries them; the legacy PCI transport is virtio/pci.
package virtio

import "github.com/govm/govm/guestmem"

// DeviceType is the virtio device ID (spec 5): also the legacy PCI
// subsystem device ID.
type DeviceType uint16

// Device types govm implements.
const (
	DeviceNet     DeviceType = 1
	DeviceBlk     DeviceType = 2
	DeviceConsole DeviceType = 3 // console (spec 5.3)
	DeviceRNG     DeviceType = 4 // entropy source (spec 5.4)
	Device9P      DeviceType = 9 // 9P transport (the 9P device, spec 5 device IDs)
)

// Interrupt is how a device tells the driver something. The transport owns
// the ISR byte and the interrupt line.
type Interrupt interface {
	// SignalUsed notifies the driver of used buffers on queue q (legacy ISR
	// bit 0). Devices call it only when Queue.needsInterrupt said so.
	SignalUsed(q int) error
	// SignalConfig notifies a configuration change (legacy ISR bit 1).
	SignalConfig() error
	// DeviceError reports guest misbehaviour that stops the device: the
	// transport sets DEVICE_NEEDS_RESET (spec 2.1.2), raises a config
	// interrupt and logs one line. govm keeps running.
	DeviceError(err error)
}

// Activation is what a device receives when the driver sets DRIVER_OK
// (spec 3.1.1).
type Activation struct {
	Mem      *guestmem.Memory
	Features uint64 // negotiated (driver-acknowledged) feature bits
	Queues   []*Queue
	// Bells has one doorbell per queue, rung when the driver notifies
	// the queue, whether by a port write on the vCPU thread or through a
	// KVM ioeventfd (pending kicks coalesce). The transport owns them;
	// the device waits on them (Server.Bell) and rings them in Reset,
	// after closing its Stop channel, to wake its sleeping goroutines.
	Bells []*Doorbell
	Intr  Interrupt
	// Member is the device goroutine's place at the machine's pause gate
	// (nil: none): it waits there (Server.Member, Member.Hold) and parks
	// before it sleeps (Member.Idle, Wake), so a pause can wait until
	// the device is quiet. A device with one goroutine uses it as is.
	Member *Member
}

// Device is a virtio device behind any transport.
type Device interface {
	Type() DeviceType
	// Features returns the device feature bits offered (spec 6).
	Features() uint64
	// QueueMaxSizes returns one entry per virtqueue: its maximum (and, on
	// the legacy transport, fixed) size, a power of 2.
	QueueMaxSizes() []uint16
	// ReadConfig and WriteConfig access the device-specific configuration
	// space at offset off. Out-of-range bytes read as zero / are ignored.
	ReadConfig(off uint64, data []byte)
	WriteConfig(off uint64, data []byte)
	// Activate starts the device's I/O goroutine(s).
	Activate(a Activation) error
	// Reset stops the I/O goroutines (closes their Stop, rings their
	// Bells), waits for them, and returns the
	// device to its initial state (spec 2.4). Safe to call when inactive.
	Reset()
}

// QueueReporter is what a Device may say of its own queues beyond the
// queue core's counters, for stats and /metrics: the spec's name for each
// queue, and the traffic only the device sees. Optional.
type QueueReporter interface {
	// QueueName names queue i ("requests", "rx", "tx").
	QueueName(i int) string
	// QueueTraffic returns queue i's payload bytes and its drops by
	// reason; ok false when the device counts none beyond the queue
	// core's (used lengths).
	QueueTraffic(i int) (bytes uint64, drops map[string]uint64, ok bool)
}

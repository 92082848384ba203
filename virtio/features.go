package virtio

// Feature bits independent of the device type (spec 6 "Reserved Feature
// Bits"). On the legacy transport only the low 32 bits exist (spec 4.1.4.8),
// so FeatureVersion1 is never offered there; it is defined so that a modern
// transport and tests can name it.
const (
	// FeatureNotifyOnEmpty (legacy, spec 6.3): the device must interrupt
	// when it has consumed every available buffer, even if interrupts are
	// suppressed by VRING_AVAIL_F_NO_INTERRUPT.
	FeatureNotifyOnEmpty = 24
	// FeatureAnyLayout (legacy, spec 6.3): the device does not rely on the
	// framing of requests into descriptors (spec 2.7.4). govm's devices
	// never do, because chains are read through Reader/Writer.
	FeatureAnyLayout = 27
	// FeatureRingIndirectDesc (spec 2.7.5.3): descriptors may point at an
	// indirect descriptor table.
	FeatureRingIndirectDesc = 28
	// FeatureRingEventIdx (spec 2.7.7, 2.7.10): used_event / avail_event
	// replace the ring flags for notification suppression.
	FeatureRingEventIdx = 29
	// FeatureVersion1 (spec 6): a modern (non-legacy) device. Not offered
	// on the legacy transport.
	FeatureVersion1 = 32
	// FeatureRingPacked (VIRTIO_F_RING_PACKED, spec 6): the queues use the
	// packed layout (spec 2.8, PackedQueue) instead of the split one. It
	// needs a modern transport, so it is not in RingFeatures.
	FeatureRingPacked = 34
)

// Bit returns the mask for feature bit n, for composing Features() values:
// Bit(FeatureRingEventIdx) | Bit(FeatureRingIndirectDesc).
func Bit(n uint) uint64 { return 1 << n }

// RingFeatures is the set of ring features the queue core implements; a
// device ORs it into its Features() so every device offers the same ring
// behaviour.
const RingFeatures = 1<<FeatureNotifyOnEmpty | 1<<FeatureAnyLayout |
	1<<FeatureRingIndirectDesc | 1<<FeatureRingEventIdx

// Split-ring flag values (spec 2.7.5, 2.7.6, 2.7.8).
const (
	// DescFlagNext marks a descriptor continued through its next field.
	DescFlagNext = 1
	// DescFlagWrite marks a device-writable descriptor.
	DescFlagWrite = 2
	// DescFlagIndirect marks a descriptor that points at an indirect table.
	DescFlagIndirect = 4

	// AvailFlagNoInterrupt is the driver asking not to be interrupted
	// (legacy-style suppression, ignored with EVENT_IDX; spec 2.7.7).
	AvailFlagNoInterrupt = 1
	// UsedFlagNoNotify is the device asking not to be kicked (ignored by
	// the driver with EVENT_IDX; spec 2.7.10).
	UsedFlagNoNotify = 1
)

// Packed-ring flag bits and event suppression values (spec 2.8.1 "Driver
// and Device Ring Wrap Counters", 2.8.10 "Driver and Device Event
// Suppression", 2.8.14 "Event Suppression Structure Format"). NEXT, WRITE
// and INDIRECT keep their split-ring values (DescFlag*).
const (
	// PackedDescFlagAvail is VIRTQ_DESC_F_AVAIL, 1 << VRING_PACKED_DESC_F_AVAIL
	// (bit 7): the driver sets it to its wrap counter to make a
	// descriptor available.
	PackedDescFlagAvail = 1 << 7
	// PackedDescFlagUsed is VIRTQ_DESC_F_USED, 1 << VRING_PACKED_DESC_F_USED
	// (bit 15): the driver sets it to the inverse of its wrap counter,
	// the device to its own wrap counter (with AVAIL equal to it) to
	// mark a descriptor used.
	PackedDescFlagUsed = 1 << 15

	// PackedEventEnable, PackedEventDisable and PackedEventDesc are the
	// desc_event_flags values RING_EVENT_FLAGS_ENABLE, _DISABLE and _DESC
	// (0x3 is reserved). DESC (notify only when the descriptor named by
	// off_wrap is made available / used) is valid only with
	// VIRTIO_F_RING_EVENT_IDX.
	PackedEventEnable  = 0
	PackedEventDisable = 1
	PackedEventDesc    = 2
	// PackedEventWrap is desc_event_wrap, bit 15 of off_wrap
	// (VRING_PACKED_EVENT_F_WRAP_CTR); bits 0-14 are desc_event_off, a
	// ring position.
	PackedEventWrap = 1 << 15
)

// Sizes of split-ring structures in guest memory (spec 2.7).
const (
	descSize      = 16 // struct virtq_desc
	usedElemSize  = 8  // struct virtq_used_elem
	ringHeaderLen = 4  // flags + idx in front of both rings
	// LegacyAlign is the legacy virtio-PCI ring alignment (spec 2.7.2,
	// 4.1.4.10: QUEUE_PFN is in 4096-byte units and the used ring starts
	// on the next 4096-byte boundary).
	LegacyAlign = 4096
	// MaxQueueSize is the largest queue size the spec allows (2.7).
	MaxQueueSize = 32768
)

// Package qstats is a virtqueue's snapshot: the one type every report of a
// queue reads (the API and govm stat, --stats, the stall watchdog,
// /metrics, the --result verdict), so each counter has one name
// everywhere. The queue core builds it (virtio.Queue.Stats); it imports
// nothing, so the control plane and the watchdog can read it without
// depending on the queue core.
package qstats

// Queue is one virtqueue's snapshot: the one every reader of a queue's
// state uses (the API and govm stat, --stats, the watchdog, /metrics and
// the --result verdict), so each counter has one name everywhere. The queue
// core fills the ring and what its device's Loop published (virtio.Queue.Stats);
// the transport adds what only it sees (kicks by port and by ioeventfd,
// interrupts raised or found the ISR set, a kick waiting in the doorbell);
// a device that is a QueueReporter adds the queue's name and its traffic.
// Counters are totals since the queue was created; indexes are as the
// guest's memory shows them at the snapshot.
type Queue struct {
	Index   int    `json:"queue"`
	Name    string `json:"name"` // "rx", "tx", "requests"
	Size    uint16 `json:"size"`
	Enabled bool   `json:"enabled"`
	Ring
	EventIdx bool   `json:"event_idx"` // VIRTIO_RING_F_EVENT_IDX negotiated
	InFlight uint16 `json:"in_flight"` // avail idx - used idx

	// The transport's: kicks by QUEUE_NOTIFY port writes that exited to
	// govm, and by KVM ioeventfd signals (counted as the device takes
	// them); a kick waiting in the doorbell, not yet taken.
	KicksPort    uint64 `json:"kicks_port"`
	KicksEventFD uint64 `json:"kicks_eventfd"`
	KickPending  bool   `json:"kick_pending"`
	// The device's Loop (Watch): kicks it woke on; re-checks that found
	// buffers the driver published with kicks off (kicks it did not have
	// to send); waits for work that its busy-poll ended.
	KicksTaken      uint64 `json:"kicks_taken"`
	KicksSuppressed uint64 `json:"kicks_suppressed"`
	Polled          uint64 `json:"polled"`

	// Interrupt decisions that said yes (Watch), and what the transport
	// made of them: the line raised for this queue, or the ISR already
	// set so no second raise (spec 4.1.4.5).
	InterruptsWanted uint64 `json:"interrupts_wanted"`
	Interrupts       uint64 `json:"interrupts"`
	SuppressedISRSet uint64 `json:"suppressed_isr_set"`
	// Interrupt decisions the driver declined (spec 2.7.7):
	// VRING_AVAIL_F_NO_INTERRUPT, or used_event not crossed.
	SuppressedNoInterrupt uint64 `json:"suppressed_no_interrupt"`
	SuppressedEventIdx    uint64 `json:"suppressed_event_idx"`

	// Chains returned to the driver and their used lengths.
	Chains    uint64 `json:"chains"`
	UsedBytes uint64 `json:"used_bytes"`
	// Bytes is the queue's payload as its device counts it (frame bytes
	// for virtio-net, vnet headers excluded), or UsedBytes for a device
	// that counts none; Drops its drops by reason.
	Bytes uint64            `json:"bytes"`
	Drops map[string]uint64 `json:"drops,omitempty"`

	// The device's Loop: asleep waiting for a kick, the avail idx it had
	// consumed then; waiting for the driver to post receive buffers.
	Sleeping    bool   `json:"sleeping"`
	SeenAvail   uint16 `json:"seen_avail"`
	NeedBuffers bool   `json:"need_buffers"`
}

// Delivered is how many of the wanted interrupts the transport delivered
// (raised, or coalesced into an ISR already set).
func (s Queue) Delivered() uint64 { return s.Interrupts + s.SuppressedISRSet }

// Ring is what the driver's and the device's halves of a split ring say
// right now: each side's flags, index and event field (spec 2.7.6,
// 2.7.8), for diagnostics. Reading it takes no part in the notification
// protocol.
type Ring struct {
	// The driver's area.
	AvailFlags uint16 `json:"avail_flags"`
	AvailIdx   uint16 `json:"avail_idx"`
	UsedEvent  uint16 `json:"used_event"`
	// The device's area.
	UsedFlags  uint16 `json:"used_flags"`
	UsedIdx    uint16 `json:"used_idx"`
	AvailEvent uint16 `json:"avail_event"`
}

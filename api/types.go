// Package api is govm's control plane: HTTP+JSON over a per-VM Unix socket
// (docs/api.md). The VM side serves it (Server); the govm list, stat,
// pause, resume and stop commands are its client (Client). It holds the
// wire types and knows nothing of KVM or virtio: the VM is an interface.
package api

import "time"

// VM states as the API reports them.
const (
	StateRunning  = "running"
	StatePaused   = "paused"
	StateStopping = "stopping"
)

// Info is GET /v1/vm: what the VM is and what it is doing.
type Info struct {
	Name     string    `json:"name"`
	PID      int       `json:"pid"`
	State    string    `json:"state"`
	CPUs     int       `json:"cpus"`
	MemBytes uint64    `json:"mem_bytes"`
	Started  time.Time `json:"started"`
	Devices  []string  `json:"devices"`
	Socket   string    `json:"socket"`
	Version  string    `json:"version"`
}

// Stats is GET /v1/stats: every queue and every vCPU.
type Stats struct {
	Name    string        `json:"name"`
	Time    time.Time     `json:"time"` // when the VM took the snapshot
	Queues  []QueueStats  `json:"queues"`
	VCPUs   []VCPUStats   `json:"vcpus"`
	Devices []DeviceStats `json:"devices"`
}

// DeviceStats is one virtio device's transport-wide counters: the legacy
// transport has one ISR and one line for all its queues.
type DeviceStats struct {
	Device      string `json:"device"`
	Status      uint8  `json:"status"`
	ISRReads    uint64 `json:"isr_reads"`
	ISREmpty    uint64 `json:"isr_empty"`
	ConfigIRQs  uint64 `json:"config_interrupts"`
	GuestErrors uint64 `json:"guest_errors"`
	ISR         uint8  `json:"isr"`  // the ISR byte now
	Line        bool   `json:"line"` // the INTx line now
}

// QueueStats is one virtqueue. Counters are totals since the VM started;
// indexes are read from the guest's rings at Time.
type QueueStats struct {
	Device string `json:"device"`
	Queue  int    `json:"queue"`
	Name   string `json:"name"` // "rx", "tx", "requests"
	Size   uint16 `json:"size"`

	KicksPort    uint64 `json:"kicks_port"`    // QUEUE_NOTIFY writes that exited to govm
	KicksEventFD uint64 `json:"kicks_eventfd"` // kicks delivered by a KVM ioeventfd

	Interrupts uint64 `json:"interrupts"` // the line raised for this queue
	// Suppressed interrupts, by reason (spec 2.7.7).
	SuppressedISR      uint64 `json:"suppressed_isr_set"`      // the ISR was already set: no second raise
	SuppressedNoIntr   uint64 `json:"suppressed_no_interrupt"` // VRING_AVAIL_F_NO_INTERRUPT
	SuppressedEventIdx uint64 `json:"suppressed_event_idx"`    // used_event not crossed
	// KicksSuppressed counts passes in which the device found new buffers
	// with notifications off (VRING_USED_F_NO_NOTIFY / avail_event): kicks
	// the driver did not have to send.
	KicksSuppressed uint64 `json:"kicks_suppressed"`
	// Polled counts waits for work that the device's busy-poll ended
	// (govm run --poll-max): buffers published with kicks off while the
	// device watched the ring, costing neither a kick nor a wakeup.
	Polled uint64 `json:"polled"`

	Chains   uint64            `json:"chains"`
	Bytes    uint64            `json:"bytes"`
	InFlight uint16            `json:"in_flight"` // avail idx - used idx
	Drops    map[string]uint64 `json:"drops,omitempty"`

	AvailIdx  uint16 `json:"avail_idx"`
	UsedIdx   uint16 `json:"used_idx"`
	SeenAvail uint16 `json:"seen_avail"` // avail idx the device had consumed when it last slept

	Watchdog []WatchdogEvent `json:"watchdog,omitempty"`
}

// WatchdogEvent is a count of one kind of lost notification the watchdog
// detected on a queue.
type WatchdogEvent struct {
	Kind  string `json:"kind"`
	Count uint64 `json:"count"`
	Last  string `json:"last,omitempty"` // the last report's line
}

// VCPUStats is one vCPU's VM exits, by reason.
type VCPUStats struct {
	ID    int               `json:"id"`
	Exits map[string]uint64 `json:"exits"`
}

// Error is the body of every non-2xx response.
type Error struct {
	Error string `json:"error"`
}

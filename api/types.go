// Package api is govm's control plane: HTTP+JSON over a per-VM Unix socket
// (docs/api.md). The VM side serves it (Server); the govm list, stat,
// pause, resume and stop commands are its client (Client). It holds the
// wire types and knows nothing of KVM, and of virtio only its queue
// snapshot: the VM is an interface.
package api

import (
	"time"

	"github.com/govm/govm/virtio/qstats"
)

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
// transport has one ISR and one line for all its queues. Names as in
// virtiopci.Stats.
type DeviceStats struct {
	Device           string `json:"device"`
	Status           uint8  `json:"status"`
	ISRReads         uint64 `json:"isr_reads"`
	ISREmpty         uint64 `json:"isr_empty"`
	ConfigInterrupts uint64 `json:"config_interrupts"`
	GuestErrors      uint64 `json:"guest_errors"`
	ISR              uint8  `json:"isr"`  // the ISR byte now
	Line             bool   `json:"line"` // the INTx line now
}

// QueueStats is one virtqueue: the queue core's snapshot (its fields and
// JSON names are qstats.Queue's, the names every govm report uses),
// with its device and what the watchdog found on it.
type QueueStats struct {
	Device string `json:"device"`
	qstats.Queue
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

package virtiotest

import (
	"sync"
	"time"

	"github.com/govm/govm/virtio"
)

// RecordingInterrupt is a virtio.Interrupt that counts what a device
// signals. Safe for concurrent use.
type RecordingInterrupt struct {
	mu      sync.Mutex
	used    map[int]int
	config  int
	errs    []error
	changed chan struct{}
}

var _ virtio.Interrupt = (*RecordingInterrupt)(nil)

// NewRecordingInterrupt returns an interrupt with all counts zero.
func NewRecordingInterrupt() *RecordingInterrupt {
	return &RecordingInterrupt{used: map[int]int{}, changed: make(chan struct{})}
}

// event records a change and wakes Changed waiters; mu must be held.
func (r *RecordingInterrupt) event() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// SignalUsed counts a used buffer notification on queue q.
func (r *RecordingInterrupt) SignalUsed(q int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.used[q]++
	r.event()
	return nil
}

// SignalConfig counts a configuration change notification.
func (r *RecordingInterrupt) SignalConfig() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.config++
	r.event()
	return nil
}

// DeviceError records a device error.
func (r *RecordingInterrupt) DeviceError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
	r.event()
}

// Used is the number of SignalUsed calls for queue q.
func (r *RecordingInterrupt) Used(q int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.used[q]
}

// Config is the number of SignalConfig calls.
func (r *RecordingInterrupt) Config() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.config
}

// Errors returns the DeviceError arguments so far.
func (r *RecordingInterrupt) Errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// Changed returns a channel closed at the next recorded event. Take it
// before checking a condition, then wait on it, to never miss an event.
func (r *RecordingInterrupt) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// WaitFor waits until cond() holds, re-checking after every event, for at
// most timeout. It reports whether cond held.
func (r *RecordingInterrupt) WaitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ch := r.Changed()
		if cond() {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return cond()
		}
	}
}

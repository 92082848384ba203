package virtio

import (
	"time"

	"github.com/govm/govm/guestmem"
)

// SetPollWindow sets p's current window, as past waits would have: for
// tests of a Loop that polls, independent of timing.
func SetPollWindow(p *Poller, d time.Duration) { p.window = d }

// Signal is the interrupt decision the Loop makes after every turn.
func (s *Server) Signal() error { return s.signal() }

// The notification calls only the serve loop makes, for the queue core's
// own tests (package virtio_test).

func (q *Queue) EnableNotify(mem *guestmem.Memory) (bool, error) { return q.enableNotify(mem) }
func (q *Queue) DisableNotify(mem *guestmem.Memory) error        { return q.disableNotify(mem) }
func (q *Queue) NeedsInterrupt(mem *guestmem.Memory) (bool, error) {
	return q.needsInterrupt(mem)
}

// The packed queue's notification calls and its counters, for the same
// tests.

func (q *PackedQueue) EnableNotify(mem *guestmem.Memory) (bool, error) { return q.enableNotify(mem) }
func (q *PackedQueue) DisableNotify(mem *guestmem.Memory) error        { return q.disableNotify(mem) }
func (q *PackedQueue) NeedsInterrupt(mem *guestmem.Memory) (bool, error) {
	return q.needsInterrupt(mem)
}
func (q *PackedQueue) Pending(mem *guestmem.Memory) (bool, error) { return q.pending(mem) }

// Counters returns the free-running avail and used counters (see
// PackedQueue): position = c & (Size-1), wrap counter = 1 ^ (c/Size)&1.
func (q *PackedQueue) Counters() (avail, used uint16) { return q.availCtr, q.usedCtr }

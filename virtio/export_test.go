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

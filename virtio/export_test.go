package virtio

import "time"

// SetPollWindow sets p's current window, as past waits would have: for
// tests of a Server that polls, independent of timing.
func SetPollWindow(p *Poller, d time.Duration) { p.window = d }

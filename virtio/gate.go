package virtio

import (
	"sync"
	"sync/atomic"
)

// Gate holds device goroutines while the VM is paused (govm pause): a
// paused VM's devices take no chain from a ring and publish none, and a
// chain not taken is a chain not lost. One Gate serves every queue of a
// machine (Queue.SetGate); devices wait on it through Queue.Hold. The
// running case costs one atomic load.
type Gate struct {
	paused atomic.Bool
	mu     sync.Mutex
	open   chan struct{} // closed by Open; replaced by Close
}

// NewGate returns an open gate.
func NewGate() *Gate {
	g := &Gate{open: make(chan struct{})}
	close(g.open)
	return g
}

// Close makes Pop wait until Open. It reports false if already closed.
func (g *Gate) Close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused.Load() {
		return false
	}
	g.open = make(chan struct{})
	g.paused.Store(true)
	return true
}

// Open releases the waiting goroutines. It reports false if already open.
func (g *Gate) Open() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.paused.Load() {
		return false
	}
	g.paused.Store(false)
	close(g.open)
	return true
}

// Closed reports whether the gate holds goroutines.
func (g *Gate) Closed() bool { return g.paused.Load() }

// wait blocks while the gate is closed, or until stop closes.
func (g *Gate) wait(stop <-chan struct{}) {
	if g == nil || !g.paused.Load() {
		return
	}
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	select {
	case <-ch:
	case <-stop:
	}
}

// Hold waits while the queue's gate is closed (the VM is paused), or until
// stop closes: a device being reset must not wait for a resume (a vCPU
// resetting the device holds the transport until it returns). The serve
// loop calls it before it takes a chain and before it publishes one;
// virtio-net RX also before it reads a frame from the backend into a
// chain it already holds. So a paused VM's rings do not change.
func (q *Queue) Hold(stop <-chan struct{}) { q.gate.wait(stop) }

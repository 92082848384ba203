package virtio

import (
	"sync"
	"sync/atomic"
)

// Gate holds device goroutines before they take a chain while the VM is
// paused (govm pause): a paused VM's devices must not consume the rings,
// and a chain not taken is a chain not lost. One Gate serves every queue
// of a machine (Queue.SetGate). The running case costs one atomic load in
// Pop.
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

// wait blocks while the gate is closed.
func (g *Gate) wait() {
	if g == nil || !g.paused.Load() {
		return
	}
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	<-ch
}

// Hold waits while the queue's gate is closed (the VM is paused). Pop
// calls it; so does the serve loop before it publishes a used chain, and
// virtio-net RX before it takes a frame from the backend into a chain it
// already holds: a paused VM's rings do not change.
func (q *Queue) Hold() { q.gate.wait() }

package virtio

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Gate holds device goroutines while the VM is paused (govm pause): a
// paused VM's devices take no chain from a ring, publish none, and do no
// I/O for the guest. One Gate serves every device of a machine. Each device
// goroutine is a Member of it (the transport joins one per activation and
// hands it to the device in Activation.Member) and waits at it through
// Member.Hold. The running case costs one atomic load.
//
// Closing the gate alone does not make the devices quiet: a goroutine that
// passed its Hold just before may be in the middle of a request (a disk
// write the host has not finished). Settle waits until every member is
// parked: waiting at the gate, or asleep on something other than a ring
// (a kick, the backend) with nothing in hand, from which it wakes through
// the gate (Member.Wake). Then, until Open, the rings, the guest memory
// the devices write and their backends do not change.
type Gate struct {
	paused atomic.Bool
	mu     sync.Mutex
	open   chan struct{} // closed by Open; replaced by Close
	// members are the device goroutines (guarded by mu).
	members map[*Member]struct{}
	// parked gets a token when a member parks or leaves while the gate
	// is closed: Settle looks again.
	parked chan struct{}
}

// NewGate returns an open gate.
func NewGate() *Gate {
	g := &Gate{open: make(chan struct{}), members: map[*Member]struct{}{}, parked: make(chan struct{}, 1)}
	close(g.open)
	return g
}

// Close makes members wait at Hold until Open. It reports false if already
// closed.
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

// Settle waits, with the gate closed, until every member is parked, at
// most timeout, or until stop closes. It returns the names of the members
// still at work when the time ran out (sorted), nil otherwise.
//
// Why this is enough: a member stores busy before it loads paused (Hold),
// and Close stores paused before Settle loads busy; Go's atomics are
// sequentially consistent, so either the member sees the gate closed and
// waits, or Settle sees it busy and waits for it to park.
func (g *Gate) Settle(timeout time.Duration, stop <-chan struct{}) (busy []string) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		busy = g.busy()
		if busy == nil {
			return nil
		}
		select {
		case <-g.parked:
		case <-stop:
			return nil
		case <-t.C:
			return busy
		}
	}
}

func (g *Gate) busy() (names []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for m := range g.members {
		if m.busy.Load() {
			names = append(names, m.name)
		}
	}
	slices.Sort(names)
	return names
}

// note tells a Settle in progress that a member parked or left.
func (g *Gate) note() {
	if g.paused.Load() {
		select {
		case g.parked <- struct{}{}:
		default: // a token is already there
		}
	}
}

// Join makes a device goroutine a member of the gate; name says which
// device, for a pause that cannot settle. The member starts at work. A nil
// gate gives a nil member, which never waits.
func (g *Gate) Join(name string) *Member {
	if g == nil {
		return nil
	}
	m := &Member{g: g, name: name}
	m.busy.Store(true)
	g.mu.Lock()
	g.members[m] = struct{}{}
	g.mu.Unlock()
	return m
}

// Member is one device goroutine's place at a Gate. Its methods are for
// that goroutine only; a nil Member does nothing.
type Member struct {
	g    *Gate
	name string
	// busy: the goroutine may touch a ring, guest memory or its backend
	// for the guest; false while it is parked.
	busy atomic.Bool
}

// Leave ends the membership: the goroutine has exited (the transport calls
// it after the device's Reset returned).
func (m *Member) Leave() {
	if m == nil {
		return
	}
	m.g.mu.Lock()
	delete(m.g.members, m)
	m.g.mu.Unlock()
	m.g.note()
}

// Hold waits while the gate is closed (the VM is paused), or until stop
// closes: a device being reset must not wait for a resume (a vCPU
// resetting the device holds the transport until it returns). The serve
// loop calls it before it takes a chain and before it publishes one;
// virtio-net RX also before it reads a frame from the backend into a
// chain it already holds; every sleep ends in it (Wake).
func (m *Member) Hold(stop <-chan struct{}) {
	if m == nil {
		return
	}
	g := m.g
	for g.paused.Load() {
		g.mu.Lock()
		ch := g.open
		g.mu.Unlock()
		m.busy.Store(false)
		g.note()
		select {
		case <-ch:
		case <-stop:
			m.busy.Store(true)
			return
		}
		// At work again before looking at the gate again (see Settle).
		m.busy.Store(true)
	}
}

// Idle parks the member before it sleeps on something that is not the
// gate (a kick, its backend, a stop): from here until Wake it touches no
// ring, no guest memory and no backend for the guest.
func (m *Member) Idle() {
	if m == nil {
		return
	}
	m.busy.Store(false)
	m.g.note()
}

// Wake ends an Idle: the member is at work again, once the gate is open
// (or stop closed).
func (m *Member) Wake(stop <-chan struct{}) {
	if m == nil {
		return
	}
	m.busy.Store(true)
	m.Hold(stop)
}

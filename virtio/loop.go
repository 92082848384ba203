package virtio

import (
	"time"
)

// The notification discipline lives in this file, once, for every device.
// A device's one I/O goroutine runs a Loop over its sources (each a queue
// and what the device does with it); the Loop decides when a source takes
// a turn, when the driver is asked for kicks (enableNotify, disableNotify),
// when the ring is re-checked before a sleep, and it makes the interrupt
// decision after every turn (needsInterrupt, in Server.signal). Devices say
// only what they do with a chain, and what they wait for when they cannot
// go on.
//
// One round of the Loop:
//
//	for each source that may have work:      // Source.due
//	    disableNotify if kicks were on       // VRING_USED_F_NO_NOTIFY, or nothing with EVENT_IDX
//	    Turn: Pop -> handle -> AddUsed, at most Budget units
//	    interrupt decision                   // needsInterrupt -> Interrupt.SignalUsed
//	work done?      -> next round at once
//	otherwise       -> spin (Poller), or
//	                   enableNotify + re-check on every ring waited on
//	                   (work found? next round) and sleep on all the
//	                   doorbells, fds and deadlines the sources wait on
//
// The invariant that makes a lost kick impossible: the Loop sleeps only
// when every source waiting on its ring has asked for kicks and re-read
// avail idx after asking (arm). A driver that published while kicks were
// off did not kick, so its buffers are found by that re-check or never.

// WaitKind is what a source waits for when its turn ends.
type WaitKind uint8

const (
	// More: the source stopped at its budget with work left; it takes
	// another turn in the next round, after the other sources'.
	More WaitKind = iota
	// WaitRing: the source needs chains and its ring is empty. The Loop
	// asks for kicks and re-checks before it sleeps on the doorbell.
	WaitRing
	// WaitFD: the source waits for Wait.FD to poll readable (a backend
	// with nothing pending). It takes a turn when the fd polls ready,
	// and also once the other sources have served Budget units since
	// its last turn, so a flood elsewhere cannot hold its work back.
	WaitFD
	// WaitUntil: the source waits for the time Wait.Until (a backoff).
	WaitUntil
)

// Wait is what a source's turn says it waits for.
type Wait struct {
	Kind  WaitKind
	FD    int       // WaitFD
	Until time.Time // WaitUntil
}

// Source is one queue a Loop serves: its Server, and the device's turn.
type Source struct {
	Server *Server
	// Handle serves one chain of a request/response queue (virtio-blk's
	// requests, virtio-net's TX): the turn pops and serves chains until
	// the ring is empty (WaitRing) or Budget is spent (More).
	Handle Handler
	// Turn, for a source driven by more than its ring (virtio-net's RX,
	// which also waits on its backend), is the whole turn instead of
	// Handle: serve at most budget units (chains, frames), and say how
	// many were served and what the source waits for now.
	Turn func(budget int) (served int, w Wait, err error)
	// Budget bounds a turn (0: no bound), so a flood on one source does
	// not starve another.
	Budget int
	// Prompts: the driver answers this source's work (a completed
	// request with the next one, a sent frame with a reply to it).
	// After such work the Loop polls before it sleeps (see Poller); a
	// loop whose sources only deliver (virtio-net RX) would find nothing
	// sooner by polling, and would only take CPU from the guest.
	Prompts bool

	// The Loop's state of the source.
	wait  Wait
	armed bool // kicks asked for (enableNotify, then re-checked)
	woken bool // the last sleep or spin found what it waits for
	// quiet: the last sleep ended without this source's kick, and it
	// had asked for kicks and re-checked before it: the next round does
	// not look at its ring (a wake that is not its kick is no reason to,
	// and a kick lost on its way, GOVM_FAULTS drop-kick, stays lost for
	// the watchdog to find, as it would on real hardware).
	quiet bool
	since uint64 // Loop.work at its last turn
	dead  bool   // stopped by an error
}

// Loop is a device's one I/O goroutine: it serves its sources in turns and
// sleeps on all of them at once, in one ppoll (Waiter). Why one goroutine
// for several queues: a request and its answer cross them (ping: RX then
// TX), and with one thread per queue each crossing wakes a second thread;
// with one, the crossing is a turn of the same loop, often taken before it
// sleeps. Firecracker's net device and QEMU's main loop have the same shape.
//
// Fill in the fields, then Run. Every source's Server has the Loop's Stop
// and Member.
type Loop struct {
	// Stop ends Run when closed (the device is being reset). Whoever
	// closes it then rings the sources' doorbells, so a sleeping Loop
	// wakes to see it (Worker.Stop does both).
	Stop <-chan struct{}
	// Member is the goroutine's place at the pause gate; nil: never held.
	Member *Member
	// Poll is the busy-poll window before a sleep (Max 0: none).
	Poll    Poller
	Sources []*Source

	w        Waiter
	bells    []*Doorbell
	rung     []bool
	fds      []int
	ready    []bool
	work     uint64 // units served by all sources
	prompted bool   // a Prompts source served since the Loop last slept
}

// Run serves until Stop closes. A source whose turn fails (guest
// misbehaviour, a closed backend) is reported to the transport
// (Interrupt.DeviceError, which sets DEVICE_NEEDS_RESET) and served no
// more; the others go on. The first turn of every source runs without
// waiting for a kick, so buffers the driver published before DRIVER_OK
// are served.
func (l *Loop) Run() {
	for _, s := range l.Sources {
		// Kicks are on until the first turn: the ring's flags are zero
		// at activation.
		s.wait, s.armed, s.woken, s.quiet, s.since, s.dead = Wait{}, true, false, false, 0, false
	}
	n := len(l.Sources)
	l.bells, l.rung = make([]*Doorbell, 0, n), make([]bool, n)
	l.fds, l.ready = make([]int, 0, n), make([]bool, n)
	for !l.stopped() {
		busy := false
		for _, s := range l.Sources {
			if s.dead || !l.due(s) {
				continue
			}
			served, err := l.turn(s)
			if err != nil {
				s.fail(err)
				continue
			}
			busy = busy || served > 0 || s.wait.Kind == More
		}
		switch {
		case busy:
			// An answer often arrives while the loop is still awake:
			// finding it on the next round costs a look at the ring,
			// sleeping first costs a wakeup.
			l.w.Busy()
		case !l.stopped():
			l.idle()
		}
	}
}

// due reports whether s may have work: it has more, or what it waits for
// is there (a look at its ring: a load of avail idx).
func (l *Loop) due(s *Source) bool {
	switch s.wait.Kind {
	case WaitRing:
		if s.woken {
			return true
		}
		if s.quiet {
			s.quiet = false
			return false
		}
		more, err := s.Server.Queue.pending(s.Server.Mem)
		return more || err != nil // the turn reports the error
	case WaitFD:
		return s.woken || l.work-s.since >= uint64(max(s.Budget, 1))
	case WaitUntil:
		return s.woken || !time.Now().Before(s.wait.Until)
	}
	return true
}

// turn runs one turn of s with kicks off, then makes the interrupt decision
// for the chains it used: also after a turn that ended on an error, since
// the chains before it are done.
func (l *Loop) turn(s *Source) (int, error) {
	srv := s.Server
	if s.armed {
		if err := srv.Queue.disableNotify(srv.Mem); err != nil {
			return 0, err
		}
		s.armed = false
	}
	s.woken, s.quiet = false, false
	var (
		n   int
		err error
	)
	if s.Turn != nil {
		n, s.wait, err = s.Turn(s.Budget)
	} else {
		n, s.wait, err = srv.drain(s.Handle, s.Budget)
	}
	l.work += uint64(n)
	s.since = l.work
	if n > 0 && s.Prompts {
		l.prompted = true
	}
	if l.stopped() {
		return n, nil // a Reset: no interrupt is owed, the driver forgets the rings
	}
	if serr := srv.signal(); err == nil {
		err = serr
	}
	return n, err
}

// idle is a round that found no work: poll for a while if the driver is
// expected to answer soon, then arm and re-check every ring waited on, and
// sleep only if all of that found nothing.
func (l *Loop) idle() {
	window := l.Poll.Begin()
	if window > 0 && l.prompted && l.spin() {
		l.Poll.Found()
		return
	}
	if l.arm() {
		l.Poll.Found()
		return
	}
	l.sleep()
	l.Poll.Found()
	l.prompted = false
}

// arm asks for kicks on every ring a source waits on, with the re-check
// that prevents lost kicks: enableNotify publishes the request, FENCE, then
// re-reads avail idx (see its ordering comment). found: a driver published
// buffers while kicks were off; serve them instead of sleeping.
func (l *Loop) arm() (found bool) {
	for _, s := range l.Sources {
		if s.dead || s.wait.Kind != WaitRing || s.armed {
			continue
		}
		more, err := s.Server.Queue.enableNotify(s.Server.Mem)
		s.armed = true
		switch {
		case err != nil:
			s.fail(err)
		case more:
			s.Server.Queue.watch.KicksSuppressed.Add(1)
			s.woken, found = true, true
		}
	}
	return found
}

// spin watches what the sources wait for during the Poller's window, with
// kicks off: their rings (a load each), their fds (one non-blocking poll),
// their deadlines. found: something is there, or Stop closed. Otherwise the
// window closed and kicks are still off: idle arms them before it sleeps.
func (l *Loop) spin() (found bool) {
	fds := l.fds[:0]
	for _, s := range l.Sources {
		if s.dead {
			continue
		}
		switch s.wait.Kind {
		case WaitRing:
			if s.armed {
				if err := s.Server.Queue.disableNotify(s.Server.Mem); err != nil {
					s.fail(err)
					return true
				}
				s.armed = false
			}
		case WaitFD:
			fds = append(fds, s.wait.FD)
		}
	}
	for l.Poll.Spinning() {
		for _, s := range l.Sources {
			if s.dead {
				continue
			}
			switch s.wait.Kind {
			case WaitRing:
				more, err := s.Server.Queue.pending(s.Server.Mem)
				if more {
					s.Server.Queue.watch.Polled.Add(1)
				}
				if more || err != nil {
					s.woken = true
					return true
				}
			case WaitUntil:
				if !time.Now().Before(s.wait.Until) {
					return true
				}
			}
		}
		if len(fds) > 0 && l.w.Peek(fds) {
			for _, s := range l.Sources {
				s.woken = s.woken || (!s.dead && s.wait.Kind == WaitFD)
			}
			return true
		}
		if l.stopped() {
			return true
		}
	}
	return false
}

// sleep waits for what the sources wait on: every live source's doorbell
// (so Stop's rings always wake it, and a kick on a ring waited on), the fds
// of those waiting on one, the earliest deadline. Parked meanwhile: a pause
// need not wait for a kick or a frame, and the wakeup goes through the gate
// before any ring is touched.
func (l *Loop) sleep() {
	bells, fds := l.bells[:0], l.fds[:0]
	var timeout time.Duration
	for _, s := range l.Sources {
		if s.dead {
			continue
		}
		bells = append(bells, s.Server.Bell)
		switch s.wait.Kind {
		case WaitRing:
			s.Server.sleeping()
		case WaitFD:
			fds = append(fds, s.wait.FD)
		case WaitUntil:
			d := max(time.Until(s.wait.Until), 1) // 0 would be no timeout
			if timeout == 0 || d < timeout {
				timeout = d
			}
		}
	}
	if len(bells) == 0 {
		// Every source has failed: it serves nothing more until
		// Reset, and a pause need not wait for it.
		l.Member.Idle()
		<-l.Stop
		return
	}
	l.Member.Idle()
	l.w.Wait(bells, l.rung[:len(bells)], fds, l.ready[:len(fds)], timeout)
	// A ring from Stop (Worker.Stop rings every doorbell) is not a kick.
	stopping := l.stopped()
	b, f := 0, 0
	for _, s := range l.Sources {
		if s.dead {
			continue
		}
		rung := l.rung[b] && !stopping
		b++
		switch s.wait.Kind {
		case WaitRing:
			s.Server.woke(rung)
			s.woken, s.quiet = rung, !rung
		case WaitFD:
			s.woken = l.ready[f]
			f++
		}
	}
	l.Member.Wake(l.Stop)
}

func (l *Loop) stopped() bool { return closed(l.Stop) }

// closed reports whether c is closed, without blocking.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// fail stops s and reports why (see Run).
func (s *Source) fail(err error) {
	s.dead = true
	s.Server.fail(err)
}

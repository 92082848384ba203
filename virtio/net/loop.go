package virtionet

import (
	"time"

	"github.com/govm/govm/virtio"
)

// loop is the device's one I/O goroutine: it serves the TX queue, the RX
// queue and the backend, taking turns, and sleeps on all three at once in
// one ppoll (virtio.Waiter): the TX doorbell, and the RX doorbell or the
// backend's PollFD, whichever RX waits for. Both doorbells are in every
// sleep, so Reset's rings always wake it.
//
// Why one goroutine and not one per queue: a request and its answer cross
// both queues (ping: RX then TX), and with one thread per queue each
// crossing wakes a second thread; with one, the crossing is a turn of the
// same loop, often taken before it sleeps. Firecracker's net device and
// QEMU's main loop have the same shape. Traffic in one direction pays
// little for it: the other side's turn costs a non-blocking look.
//
// Fairness: each turn serves at most passBudget TX chains and reads at most
// passBudget RX frames, so a flood one way cannot starve the other.
//
// Notifications stay per queue, in virtio.Server: TX runs Serve's pass
// (Pass) with its disable, drain, enable, re-check; RX arms kicks only
// while it has no buffers. The loop sleeps only when TX's pass ended idle
// (kicks on, re-check empty) and RX said what it waits for.
type loop struct {
	rx   *rx
	tx   *tx
	be   Backend
	stop <-chan struct{}

	w     virtio.Waiter
	poll  virtio.Poller       // the busy-poll window before a sleep
	bells [2]*virtio.Doorbell // RXQueue, TXQueue
	rung  [2]bool
	fds   [1]int // the backend's PollFD while RX waits for a frame
	ready [1]bool
}

// passBudget is how many TX chains, or RX frames, one turn serves before
// the other queue's turn: batchMax, the chains between interrupt decisions.
const passBudget = batchMax

// run serves until Reset. A queue that fails (guest misbehaviour, a closed
// backend) stops and reports it (fail); the other goes on.
//
// It sleeps only after a round in which neither queue did anything: an
// answer often arrives while the loop is still awake (the guest's reply to
// the frame RX just delivered), and finding it then costs a look at the
// ring, where sleeping first costs a wakeup. A look at the TX ring is a few
// loads; a look at the backend is a system call, so RX takes a turn only
// when it may find something: after a sleep (the poll said what is ready),
// while it has more than its budget or waits on the ring or a pause rather
// than the backend, and after TX has served passBudget chains since its
// last look (so a TX flood cannot keep RX's frames waiting).
func (l *loop) run() {
	rxLive, txLive := true, true
	if err := l.rx.Quiet(); err != nil {
		l.rx.fail(err)
		rxLive = false
	}
	rxTurn, txSince := true, 0
	answered := false // TX served chains since the loop last slept
	for !l.tx.Stopped() {
		busy := false
		if rxLive && rxTurn {
			w, did, err := l.rx.serve(passBudget)
			if err != nil {
				l.rx.fail(err)
				rxLive = false
			}
			busy = did > 0 || w == rxGo
			rxTurn = w != rxWaitFrame
			txSince = 0
		}
		if txLive {
			end, n, err := l.tx.Pass(l.tx.handle, passBudget)
			switch {
			case err != nil:
				l.tx.fail(err)
				txLive = false
			case end == virtio.PassStopped:
				return
			}
			busy = busy || n > 0 || end == virtio.PassMore
			answered = answered || n > 0
			if txSince += n; txSince >= passBudget {
				rxTurn = true
			}
		}
		if busy {
			l.w.Busy() // a flood may keep it from sleeping for long
			continue
		}
		if answered && l.spin(txLive, rxLive) {
			rxTurn = true
			continue
		}
		if err := l.sleep(txLive, rxLive); err != nil {
			l.rx.fail(err)
			rxLive = false
		}
		l.poll.Found()
		rxTurn, answered = true, false
	}
}

// spin busy-polls what the loop would sleep on, for the Poller's window
// (virtio.Poller, govm run --poll-max): TX's ring with its kicks off, and
// RX's ring or the backend's fd, whichever RX waits for. found: something
// is there (or a queue's ring could not be read, which its next turn
// reports), go round again. Otherwise TX's kicks are on again, after the
// same re-check as at the end of its pass, and the loop sleeps.
//
// Why: the answer to a frame RX just delivered (ping's reply) comes back
// on TX a guest turnaround later, and the next request on the tap soon
// after; found while polling, neither costs this thread a wakeup, nor the
// guest a kick. RX's kicks stay as they are: it polls its ring only while
// it has no buffers, and a refill's kick then costs a spurious wakeup at
// most.
//
// The loop spins only once the guest has sent since the loop last slept
// (run's answered): polling pays when the guest answers what it receives.
// A guest that only receives has nothing for the spin to find sooner than
// the tap's wakeup brings it, and the spinning thread only takes CPU from
// the guest and the sender, so fewer frames reach the guest.
func (l *loop) spin(txLive, rxLive bool) (found bool) {
	if l.poll.Begin() == 0 {
		return false
	}
	rxLive = rxLive && l.rx.wait != rxWaitPause
	if txLive && l.tx.Quiet() != nil {
		return true
	}
	fds := l.fds[:0]
	if rxLive && l.rx.wait == rxWaitFrame {
		fds = append(fds, l.be.PollFD())
	}
	for !found && l.poll.Spinning() {
		var err error
		if txLive {
			found, err = l.tx.Pending()
		}
		if !found && err == nil && rxLive {
			if len(fds) > 0 {
				found = l.w.Peek(fds)
			} else {
				found, err = l.rx.Pending()
			}
		}
		found = found || err != nil || l.tx.Stopped()
	}
	if !found && txLive {
		more, err := l.tx.Rearm()
		found = more || err != nil
	}
	if found {
		l.poll.Found()
	}
	return found
}

// sleep waits for what the live queues wait on: TX's kick (its pass ended
// idle), and RX's kick, frame or pause.
func (l *loop) sleep(txLive, rxLive bool) error {
	fds := l.fds[:0]
	var timeout time.Duration
	if rxLive {
		switch l.rx.wait {
		case rxWaitFrame:
			fds = append(fds, l.be.PollFD())
		case rxWaitPause:
			timeout = max(time.Until(l.rx.until), 1) // 0 would be no timeout
		}
		l.rx.sleeping()
	}
	if txLive {
		l.tx.Sleeping()
	}
	// Parked while asleep: a pause need not wait for a kick or a frame,
	// and the wakeup goes through the gate before either queue's ring.
	l.tx.Member.Idle()
	l.w.Wait(l.bells[:], l.rung[:], fds, l.ready[:len(fds)], timeout)
	if txLive {
		l.tx.Woke(l.rung[TXQueue])
	}
	l.tx.Member.Wake(l.stop)
	if rxLive {
		return l.rx.woke(l.rung[RXQueue])
	}
	return nil
}

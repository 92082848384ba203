package virtioblk

import (
	"sync"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
)

// job is one accepted request on its way through the device: parsed on the
// queue goroutine, executed there or by the pool, completed on the queue
// goroutine again. Whoever holds the job is the only one touching its
// chain; the channel hand-overs order their memory accesses.
type job struct {
	c      *virtio.Chain
	r      request
	status uint8
	data   uint64 // data bytes put into guest memory directly (IN)
	batch  *batch
	epoch  uint64 // OUT: the flush epoch it was accepted in; FLUSH: its own
}

// needsIO says whether executing the request touches the backend (and is
// worth handing to the pool). Everything else is answered on the spot.
func (j *job) needsIO(readOnly bool) bool {
	switch j.r.typ {
	case TypeIn:
		return true
	case TypeOut, TypeFlush:
		return !readOnly // read-only: IOERR / nothing to sync
	}
	return false
}

// batch is the requests taken off the ring in one drain pass. The device
// interrupts once per batch, when its last request completes, which keeps
// the shape of the serial loop (one interrupt per drained batch) even
// though its requests finish in any order.
type batch struct{ left int }

// flight is the queue goroutine's book of accepted, not yet completed
// requests, and of the order FLUSH needs.
//
// Spec 5.2.6.2 (legacy: 5.2.6.3): a FLUSH commits the writes completed
// before it. The device goes further and also waits for every write it
// accepted before the flush: the flush gets an epoch, writes carry the
// epoch they were accepted in, and a flush starts (Sync) only when no
// write of its epoch or an earlier one is still in flight. Writes accepted
// after it are not ordered against it, as on real disks.
type flight struct {
	n         int  // accepted, not completed
	capped    bool // the last drain stopped at the in-flight cap
	signalDue bool // a batch completed since the last NeedsInterrupt

	pending []*job // to start (dispatch to the pool)
	epoch   uint64
	writes  map[uint64]int // writes in flight per epoch
	flushes []*job         // flushes waiting for earlier writes, in order
}

// add files a request for I/O: pending to start, or held if it is a flush
// behind writes.
func (f *flight) add(j *job) {
	switch j.r.typ {
	case TypeOut:
		j.epoch = f.epoch
		f.writes[f.epoch]++
	case TypeFlush:
		j.epoch = f.epoch
		f.epoch++
		if f.writesUpTo(j.epoch) {
			f.flushes = append(f.flushes, j)
			return
		}
	}
	f.pending = append(f.pending, j)
}

// done records that j's I/O is over and releases the flushes that were
// waiting only for it.
func (f *flight) done(j *job) {
	if j.r.typ != TypeOut {
		return
	}
	if f.writes[j.epoch]--; f.writes[j.epoch] <= 0 {
		delete(f.writes, j.epoch)
	}
	for len(f.flushes) > 0 && !f.writesUpTo(f.flushes[0].epoch) {
		f.pending = append(f.pending, f.flushes[0])
		f.flushes = f.flushes[1:]
	}
}

// writesUpTo reports whether a write accepted in epoch e or earlier is in
// flight. The map holds one entry per epoch with writes in flight: few.
func (f *flight) writesUpTo(e uint64) bool {
	for ep := range f.writes {
		if ep <= e {
			return true
		}
	}
	return false
}

// pool is a fixed set of goroutines executing requests for the queue
// goroutine. Both channels hold QueueSize jobs, more than can be in flight
// (the queue goroutine caps that at the queue size), so neither side ever
// blocks on a send.
type pool struct {
	n    int
	dev  *Device
	mem  *guestmem.Memory
	jobs chan *job
	done chan *job
	wg   sync.WaitGroup
}

func newPool(n int, dev *Device, mem *guestmem.Memory) *pool {
	return &pool{n: n, dev: dev, mem: mem,
		jobs: make(chan *job, QueueSize), done: make(chan *job, QueueSize)}
}

func (p *pool) start(stop <-chan struct{}) {
	p.wg.Add(p.n)
	for range p.n {
		go p.loop(stop)
	}
}

func (p *pool) loop(stop <-chan struct{}) {
	defer p.wg.Done()
	x := executor{dev: p.dev, mem: p.mem}
	for j := range p.jobs {
		select {
		case <-stop:
			// Reset: nobody will complete it, and the device must
			// stop touching guest memory.
			continue
		default:
		}
		j.status, j.data = x.execute(j.c, j.r)
		p.done <- j
	}
}

// shutdown waits for the goroutines to finish the job each is executing;
// queued jobs are dropped (loop sees stop closed).
func (p *pool) shutdown() {
	close(p.jobs)
	p.wg.Wait()
}

// startPending starts the pending requests on the pool. A request that is
// the only one in flight (queue depth 1) is executed here instead: it
// costs no hand-over between goroutines, and the queue goroutine has
// nothing else to do meanwhile. Otherwise the queue goroutine stays free
// to take completions and kicks while the pool works, and a slow request
// never holds up the ring. Completing a request may release a flush,
// hence the loop.
func (w *worker) startPending() error {
	for w.pool != nil && len(w.flight.pending) > 0 {
		jobs := w.flight.pending
		w.flight.pending = nil
		if len(jobs) == 1 && w.flight.n == 1 {
			j := jobs[0]
			j.status, j.data = w.x.execute(j.c, j.r)
			if err := w.finishIO(j); err != nil {
				return err
			}
			continue
		}
		for _, j := range jobs {
			w.pool.jobs <- j
		}
	}
	return nil
}

// finishIO completes a request whose I/O is over.
func (w *worker) finishIO(j *job) error {
	w.flight.done(j)
	return w.complete(j)
}

// reapReady completes every request the pool has finished, without
// waiting, and starts the flushes that released.
func (w *worker) reapReady() error {
	if w.pool == nil {
		return nil
	}
	for {
		select {
		case j := <-w.pool.done:
			if err := w.finishIO(j); err != nil {
				return err
			}
		default:
			return w.startPending()
		}
	}
}

// completeReady handles a request the event loop received from the pool,
// with any others that finished meanwhile, then interrupts if a batch is
// complete.
func (w *worker) completeReady(j *job) error {
	if err := w.finishIO(j); err != nil {
		return err
	}
	if err := w.reapReady(); err != nil {
		return err
	}
	return w.signalIfDue()
}

// settle waits until nothing accepted is in flight (or the device stops),
// completing requests as they finish.
func (w *worker) settle() {
	for w.pool != nil && w.flight.n > 0 {
		select {
		case j := <-w.pool.done:
			if w.finishIO(j) != nil || w.startPending() != nil {
				return
			}
		case <-w.stop:
			return
		}
	}
}

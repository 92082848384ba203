package virtio

import (
	"errors"
	"sync"
)

// ErrActive is what Worker.Start returns while the goroutine runs: the
// device was activated twice without a reset.
var ErrActive = errors.New("virtio: device already active")

// Worker is the lifecycle every virtio device's I/O goroutine shares: Start
// at activation (spec 3.1.1: the device is live after DRIVER_OK), Stop at
// reset, returning only once the goroutine has, so that after a reset the
// device touches neither guest memory nor its queues (spec 2.4). The zero
// Worker is ready; its methods are safe against each other.
type Worker struct {
	mu    sync.Mutex
	stop  chan struct{}
	done  chan struct{}
	bells []*Doorbell
}

// Start runs run on a new goroutine with the channel Stop closes. run must
// return soon after stop closes, including from a sleep on any of bells:
// Stop rings them all after closing stop (a ring before the sleep stays
// pending, see Doorbell, so none is lost).
func (w *Worker) Start(bells []*Doorbell, run func(stop <-chan struct{})) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		return ErrActive
	}
	stop, done := make(chan struct{}), make(chan struct{})
	w.stop, w.done, w.bells = stop, done, bells
	go func() {
		defer close(done)
		run(stop)
	}()
	return nil
}

// Running reports whether a goroutine Start began has not been stopped.
func (w *Worker) Running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stop != nil
}

// Stop ends the goroutine Start began and waits for it; without one it
// does nothing.
func (w *Worker) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop == nil {
		return
	}
	close(w.stop)
	for _, b := range w.bells {
		b.Ring()
	}
	<-w.done
	w.stop, w.done, w.bells = nil, nil, nil
}

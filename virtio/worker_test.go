package virtio_test

import (
	"errors"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
)

// TestWorker: Start runs the goroutine once (a second Start is ErrActive);
// Stop wakes it from a sleep on its doorbell, returns only after it has
// returned, and a Worker starts again after Stop. Stop without Start is a
// no-op.
func TestWorker(t *testing.T) {
	var w virtio.Worker
	w.Stop()
	bell, err := virtio.NewDoorbell()
	if err != nil {
		t.Fatal(err)
	}
	defer bell.Close()
	for round := range 2 {
		returned := make(chan struct{})
		asleep := make(chan struct{})
		err := w.Start([]*virtio.Doorbell{bell}, func(stop <-chan struct{}) {
			defer close(returned)
			close(asleep)
			for {
				bell.Wait() // as a device sleeps on its kick
				select {
				case <-stop:
					return
				default:
				}
			}
		})
		if err != nil {
			t.Fatalf("round %d: Start: %v", round, err)
		}
		if err := w.Start(nil, func(<-chan struct{}) {}); !errors.Is(err, virtio.ErrActive) {
			t.Fatalf("round %d: second Start: %v, want ErrActive", round, err)
		}
		<-asleep
		time.Sleep(10 * time.Millisecond)
		stopped := make(chan struct{})
		go func() { w.Stop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Stop did not return: the sleep did not end", round)
		}
		select {
		case <-returned:
		default:
			t.Fatalf("round %d: Stop returned before the goroutine", round)
		}
	}
}

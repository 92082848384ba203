package outq

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/govm/govm/internal/syncbuf"
)

func TestWritesInOrder(t *testing.T) {
	var dst syncbuf.Buffer
	q := New(&dst, 1<<20)
	var want bytes.Buffer
	for i := 0; i < 1000; i++ {
		line := []byte{byte('a' + i%26), '\n'}
		want.Write(line)
		if n, err := q.Write(line); n != 2 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if ab := q.Close(time.Second, 5*time.Second); ab != 0 || dst.String() != want.String() || q.Dropped() != 0 || q.Written() != uint64(want.Len()) {
		t.Fatalf("abandoned %d, dropped %d, wrote %d bytes of %d", ab, q.Dropped(), len(dst.String()), want.Len())
	}
}

// TestStalledDestination: with nobody reading the pipe, Write still
// returns at once, what does not fit the queue is dropped and counted, and
// Close gives up after its wait, saying how much it abandoned.
func TestStalledDestination(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	q := New(w, 256<<10) // more than the pipe holds
	chunk := bytes.Repeat([]byte("x"), 1000)
	start := time.Now()
	total := 0
	for total < 1<<20 { // far more than the pipe (64 KiB) and the queue hold
		q.Write(chunk)
		total += len(chunk)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("writing 1 MiB into a stalled pipe took %v: Write blocked", d)
	}
	if q.Dropped() == 0 || q.Err() != nil {
		t.Errorf("dropped %d (err %v): want drops and no error, as the pipe is never read", q.Dropped(), q.Err())
	}
	start = time.Now()
	ab := q.Close(100*time.Millisecond, time.Minute)
	if d := time.Since(start); d > time.Second || ab == 0 {
		t.Errorf("Close took %v and abandoned %d bytes; want ~100 ms and the queued bytes", d, ab)
	}
	if ab+q.Dropped() > uint64(total) {
		t.Errorf("abandoned %d + dropped %d > written %d", ab, q.Dropped(), total)
	}
	q.Write(chunk) // after Close: dropped, not blocked
}

type failing struct{}

func (failing) Write(p []byte) (int, error) { return 0, errors.New("broken pipe") }

func TestDestinationError(t *testing.T) {
	q := New(failing{}, 1<<10)
	q.Write([]byte("hello"))
	deadline := time.Now().Add(2 * time.Second)
	for q.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	q.Write([]byte("world"))
	if q.Err() == nil || q.Dropped() != 10 {
		t.Fatalf("err %v, dropped %d; want the error and all 10 bytes dropped", q.Err(), q.Dropped())
	}
	if ab := q.Close(time.Second, time.Second); ab != 0 {
		t.Errorf("abandoned %d after an error", ab)
	}
}

// slow takes at most 10 bytes a write, 50 ms each: a reader that keeps
// up, slowly.
type slow struct{ syncbuf.Buffer }

func (s *slow) Write(p []byte) (int, error) {
	time.Sleep(50 * time.Millisecond)
	return s.Buffer.Write(p[:min(len(p), 10)])
}

// TestCloseWaitsForSlowReader: Close keeps waiting while the destination
// makes progress, though the whole drain (10 writes, 500 ms) takes longer
// than idle.
func TestCloseWaitsForSlowReader(t *testing.T) {
	var dst slow
	q := New(&dst, 1<<20)
	q.Write(bytes.Repeat([]byte("0123456789"), 10))
	if ab := q.Close(200*time.Millisecond, 10*time.Second); ab != 0 || len(dst.String()) != 100 {
		t.Fatalf("abandoned %d, wrote %d of 100 bytes", ab, len(dst.String()))
	}
}

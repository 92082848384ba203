package virtiorng

import (
	"fmt"
	"io"
	"time"

	"github.com/govm/govm/virtio"
)

// server is the I/O goroutine's state: the request queue's turn.
type server struct {
	dev    *Device
	srv    virtio.Server
	bucket bucket
	held   *virtio.Chain // popped, waiting for the rate limit's allowance
	buf    [4096]byte    // getrandom's bytes on their way into a chain
}

// turn fills up to budget chains, each with as many bytes as it holds (at
// most maxChunk, and at most the rate limit's one second). A chain the
// allowance cannot fill yet is held and the turn waits for the bucket to
// refill (WaitUntil): the guest gets whole buffers at the limited pace,
// never a trickle of one-byte answers, each an interrupt; Linux's driver
// simply waits for its buffer.
func (s *server) turn(budget int) (served int, w virtio.Wait, err error) {
	for ; served < budget; served++ {
		if s.srv.Stopped() {
			return served, virtio.Wait{Kind: virtio.WaitRing}, nil
		}
		if s.held == nil {
			s.srv.Hold() // paused: take nothing
			c, err := s.srv.Queue.Pop(s.srv.Mem)
			if err != nil || c == nil {
				return served, virtio.Wait{Kind: virtio.WaitRing}, err
			}
			if err := s.check(c); err != nil {
				return served, virtio.Wait{}, err
			}
			s.held = c
		}
		c := s.held
		want := min(c.WritableLen(), maxChunk)
		if s.bucket.rate != 0 {
			want = min(want, s.bucket.rate)
		}
		if now := time.Now(); s.bucket.take(now) < want {
			return served, virtio.Wait{Kind: virtio.WaitUntil, Until: s.bucket.when(want)}, nil
		}
		n, err := s.fill(c, want)
		if err != nil {
			return served, virtio.Wait{}, err
		}
		s.held = nil
		s.bucket.spend(uint64(n))
		s.dev.bytes.Add(uint64(n))
		if err := s.srv.Used(c.Head, n); err != nil {
			return served, virtio.Wait{}, err
		}
	}
	return served, virtio.Wait{Kind: virtio.More}, nil
}

// check refuses a chain the driver must not post (spec 5.4.6.1): one with
// a driver-readable buffer, or no room for a byte. A guest error.
func (s *server) check(c *virtio.Chain) error {
	if c.ReadableLen() != 0 || c.WritableLen() == 0 {
		return &virtio.GuestError{Queue: s.srv.Queue.Index, Head: c.Head, HeadValid: true,
			Err: fmt.Errorf("%w: %d readable and %d writable bytes, want only writable ones",
				ErrBadRequest, c.ReadableLen(), c.WritableLen())}
	}
	return nil
}

// fill writes n random bytes into c's writable part (which holds at least
// n) and returns n, the used length (bytes written, spec 2.7.8).
func (s *server) fill(c *virtio.Chain, n uint64) (uint32, error) {
	w := c.Writer()
	var done uint64
	for done < n {
		b := s.buf[:min(uint64(len(s.buf)), n-done)]
		if _, err := io.ReadFull(s.dev.src, b); err != nil {
			return 0, fmt.Errorf("virtiorng: host entropy: %w", err)
		}
		if _, err := w.Write(b); err != nil {
			return 0, fmt.Errorf("virtiorng: %w", err)
		}
		done += uint64(len(b))
	}
	return uint32(done), nil
}

// bucket is the rate limit: a token bucket of rate bytes per second,
// holding at most one second's worth. rate 0: no limit.
type bucket struct {
	rate   uint64
	tokens uint64
	last   time.Time
}

func (b *bucket) init(rate uint64, now time.Time) { b.rate, b.tokens, b.last = rate, rate, now }

// take refills the bucket for the time since the last refill and returns
// how many bytes may be given now (^0 without a limit).
func (b *bucket) take(now time.Time) uint64 {
	if b.rate == 0 {
		return ^uint64(0)
	}
	if d := now.Sub(b.last); d > 0 {
		add := uint64(d.Seconds() * float64(b.rate))
		if add > 0 {
			b.tokens = min(b.tokens+add, b.rate)
			b.last = now
		}
	}
	return b.tokens
}

// spend takes n bytes out of the bucket.
func (b *bucket) spend(n uint64) {
	if b.rate != 0 {
		b.tokens -= min(n, b.tokens)
	}
}

// when is when the bucket will hold n bytes (n at most rate).
func (b *bucket) when(n uint64) time.Time {
	short := n - min(n, b.tokens)
	return b.last.Add(time.Duration(float64(short) / float64(b.rate) * float64(time.Second)))
}

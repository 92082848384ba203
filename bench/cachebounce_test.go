package bench

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The cache-bounce experiment: two threads on two CPUs each increment a
// counter of their own, with the counters on one cache line (share) or on
// lines of their own (unshare), with plain increments or locked ones
// (lockshare, lockunshare). What sharing adds to an increment is the price
// of moving a line between the CPUs: the unit the ring simulator's counts
// are multiplied by to predict a ring's time (docs/ringsim.md).

// pinned runs f on a thread of its own pinned to cpu. The thread stays
// locked to the goroutine, so it ends with it: a pinned thread handed back
// to Go's scheduler would run later benchmarks, and the VMMs they start,
// on one CPU.
func pinned(cpu int, f func()) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return err
	}
	f()
	return nil
}

// twoCPUs returns two CPUs this process may run on, or skips.
func twoCPUs(b testing.TB) [2]int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		b.Fatal(err)
	}
	var cpus []int
	for c := 0; c < 1024 && len(cpus) < 2; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		b.Skip("needs two CPUs")
	}
	return [2]int{cpus[0], cpus[1]}
}

type counters struct {
	shared [2]uint64 // one line
	_      [64]byte
	a      uint64
	_      [120]byte
	b      uint64 // 128 bytes from a: its own line even with adjacent-line prefetch
}

// bump increments *p n times, plainly or with a locked add. go:noinline
// keeps the compiler from folding the loop into one store.
//
//go:noinline
func bump(p *uint64, n int, locked bool) {
	if locked {
		for i := 0; i < n; i++ {
			atomic.AddUint64(p, 1)
		}
		return
	}
	for i := 0; i < n; i++ {
		*p++
	}
}

func bounceRun(b *testing.B, cpus [2]int, share, locked bool) time.Duration {
	var c counters
	p0, p1 := &c.a, &c.b
	if share {
		p0, p1 = &c.shared[0], &c.shared[1]
	}
	var wg sync.WaitGroup
	var start sync.WaitGroup
	start.Add(1)
	errs := make([]error, 2)
	wg.Add(2)
	for i, p := range []*uint64{p0, p1} {
		go func() {
			defer wg.Done()
			errs[i] = pinned(cpus[i], func() {
				start.Wait()
				bump(p, b.N, locked)
			})
		}()
	}
	t0 := time.Now()
	start.Done()
	wg.Wait()
	d := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	if *p0 != uint64(b.N) || *p1 != uint64(b.N) {
		b.Fatalf("counters %d and %d after %d increments each", *p0, *p1, b.N)
	}
	return d
}

// pingPong hands one counter back and forth n times: each thread waits
// for the other's increment and adds its own, so every increment is a read
// of a line the other side wrote and a write to a line it holds: two
// transfers in the simulator's terms (virtio/ringsim).
func pingPong(b *testing.B, cpus [2]int) time.Duration {
	var c counters
	p := &c.shared[0]
	var wg sync.WaitGroup
	var abort atomic.Bool // a side that cannot go on stops the other
	errs := make([]error, 2)
	wg.Add(2)
	t0 := time.Now()
	deadline := t0.Add(time.Minute)
	for i := 0; i < 2; i++ {
		go func() {
			defer wg.Done()
			var spinErr error
			errs[i] = pinned(cpus[i], func() {
				for k := 0; k < b.N; k++ {
					want := uint64(2*k + i)
					for spins := 0; atomic.LoadUint64(p) != want; spins++ {
						if abort.Load() {
							return
						}
						if spins%(1<<20) == 0 && time.Now().After(deadline) {
							spinErr = fmt.Errorf("hand-off %d not back after a minute", k)
							abort.Store(true)
							return
						}
					}
					atomic.StoreUint64(p, want+1)
				}
			})
			if errs[i] == nil {
				errs[i] = spinErr
			}
			if errs[i] != nil {
				abort.Store(true)
			}
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	if got := atomic.LoadUint64(p); got != uint64(2*b.N) {
		b.Fatalf("counter %d after %d hand-offs", got, 2*b.N)
	}
	return d
}

// BenchmarkCacheBounce reports ns per increment for each variant; the
// difference between share and unshare (lockshare and lockunshare) is
// what a line moving between the CPUs adds to an increment.
func BenchmarkCacheBounce(b *testing.B) {
	cpus := twoCPUs(b)
	for _, v := range []struct {
		name          string
		share, locked bool
	}{{"share", true, false}, {"unshare", false, false}, {"lockshare", true, true}, {"lockunshare", false, true}} {
		b.Run(v.name, func(b *testing.B) {
			d := bounceRun(b, cpus, v.share, v.locked)
			b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "ns/inc")
		})
	}
	b.Run("pingpong", func(b *testing.B) {
		d := pingPong(b, cpus)
		// 2*b.N hand-offs, two transfers each.
		b.ReportMetric(float64(d.Nanoseconds())/float64(4*b.N), "ns/transfer")
	})
}

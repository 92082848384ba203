package bench

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/ringsim"
	"github.com/govm/govm/virtio/vring"
)

// The ring benchmark, in the spirit of Linux's tools/virtio/ringtest: a
// driver thread (virtio/vring, Linux's accesses) and a device thread
// (govm's queue core) on two CPUs, passing buffers through one ring in
// shared memory, split and packed in the same run. With polling both sides
// spin; with notifications the device sleeps on a kick eventfd when its
// ring is empty and the driver waits on an interrupt eventfd, each side
// asking for the other's notification the way Linux and govm's Loop do.

// ringBenchScenario is the ring both layouts run. The simulator's scenario
// with the same ring, chains in flight and chain length is reported beside
// it, with the simulator's lagging device and with an eager one: the
// benchmark's threads set their own distances by their speeds, which the
// simulator's rounds only bracket.
func ringBenchScenario(layout ringsim.Layout, poll bool) ringsim.Scenario {
	return ringsim.Scenario{Layout: layout, Line: 64, Size: 256, InFlight: 128, Batch: 1,
		Chain: 1, EventIdx: true, Poll: poll, Reuse: vring.LIFO}
}

// hangAfter bounds every wait: a notification lost is a hang, reported.
const hangAfter = 5 * time.Second

// eventFD is a notification channel between the two threads; signals
// counts the notifications sent through it.
type eventFD struct {
	fd      int
	signals *int
}

func newEventFD(b testing.TB) eventFD {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	return eventFD{fd: fd, signals: new(int)}
}

func (e eventFD) signal() {
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	*e.signals++ // only the sending thread touches it
	unix.Write(e.fd, one[:])
}

// wait blocks until signalled, or fails after hangAfter.
func (e eventFD) wait() error {
	fds := []unix.PollFd{{Fd: int32(e.fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(hangAfter/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no notification in %v: lost", hangAfter)
		}
		var v [8]byte
		_, err = unix.Read(e.fd, v[:])
		return err
	}
}

// stallCheck bounds a polling side's spin: progress marks work done, idle
// reports whether none has been done for hangAfter. It reads the clock
// only every 4096 idle turns, because reading it may be a system call (it
// is on hosts without a vDSO clock), which would slow the spin it bounds.
type stallCheck struct {
	turns    int
	moved    bool
	deadline time.Time
}

func (c *stallCheck) progress() { c.moved, c.turns = true, 0 }

func (c *stallCheck) idle() bool {
	if c.turns++; c.turns%4096 != 0 {
		return false
	}
	now := time.Now()
	if c.moved || c.deadline.IsZero() {
		c.moved, c.deadline = false, now.Add(hangAfter)
		return false
	}
	return now.After(c.deadline)
}

// ringRun passes n buffers through the ring and returns the time and the
// kicks and interrupts sent.
func ringRun(b testing.TB, cpus [2]int, s ringsim.Scenario, n int) (time.Duration, int, int) {
	p, err := ringsim.NewPair(s)
	if err != nil {
		b.Fatal(err)
	}
	kick, irq := newEventFD(b), newEventFD(b)
	var wg sync.WaitGroup
	var drvErr, devErr error
	wg.Add(2)
	t0 := time.Now()
	go func() {
		defer wg.Done()
		if err := pinned(cpus[0], func() { drvErr = ringDriver(p.Driver, s, n, kick, irq) }); err != nil {
			drvErr = err
		}
	}()
	go func() {
		defer wg.Done()
		if err := pinned(cpus[1], func() { devErr = ringDevice(p, s, n, kick, irq) }); err != nil {
			devErr = err
		}
	}()
	wg.Wait()
	d := time.Since(t0)
	if drvErr != nil || devErr != nil {
		b.Fatalf("driver: %v; device: %v", drvErr, devErr)
	}
	return d, *kick.signals, *irq.signals
}

func ringDriver(d ringsim.DriverSide, s ringsim.Scenario, n int, kick, irq eventFD) error {
	if s.Poll {
		d.DisableCB()
	}
	buf := vring.Buf{Out: 1, In: s.Chain - 1, Len: 64}
	added, done, inFlight := 0, 0, 0
	var stall stallCheck
	for done < n {
		if s.Poll {
			for {
				if _, _, ok := d.GetBuf(); !ok {
					break
				}
				done++
				inFlight--
				stall.progress()
			}
		}
		k := 0
		for inFlight < s.InFlight && added < n {
			if _, ok := d.Add(buf); !ok {
				return fmt.Errorf("ring full at %d in flight", inFlight)
			}
			added++
			inFlight++
			k++
		}
		if k > 0 && d.KickPrepare() && !s.Poll {
			kick.signal()
		}
		if s.Poll {
			if k == 0 && stall.idle() {
				return fmt.Errorf("driver: %d of %d buffers back, none for %v", done, n, hangAfter)
			}
			continue
		}
		// Interrupt-driven: wait, then virtblk_done's loop.
		if err := irq.wait(); err != nil {
			return fmt.Errorf("driver at %d of %d: %w", done, n, err)
		}
		if !d.Interrupt() {
			continue
		}
		for {
			d.DisableCB()
			for {
				if _, _, ok := d.GetBuf(); !ok {
					break
				}
				done++
				inFlight--
			}
			if !d.Poll(d.EnableCBPrepare()) {
				break
			}
		}
	}
	return nil
}

func ringDevice(p *ringsim.Pair, s ringsim.Scenario, n int, kick, irq eventFD) error {
	m, q := p.DeviceMem, p.Device
	elems := make([]virtio.UsedElem, 0, s.Size)
	used := 0
	if err := q.DisableNotify(m); err != nil {
		return err
	}
	var stall stallCheck
	for used < n {
		elems = elems[:0]
		for {
			c, err := q.Pop(m)
			if err != nil {
				return err
			}
			if c == nil {
				break
			}
			elems = append(elems, virtio.UsedElem{Head: c.Head})
		}
		if len(elems) > 0 {
			if err := q.AddUsedBatch(m, elems); err != nil {
				return err
			}
			used += len(elems)
			intr, err := q.NeedsInterrupt(m)
			if err != nil {
				return err
			}
			if intr && !s.Poll {
				irq.signal()
			}
			stall.progress()
			continue
		}
		if s.Poll {
			if stall.idle() {
				return fmt.Errorf("device: %d of %d used, nothing new for %v", used, n, hangAfter)
			}
			continue
		}
		more, err := q.EnableNotify(m)
		if err != nil {
			return err
		}
		if !more {
			if err := kick.wait(); err != nil {
				return fmt.Errorf("device at %d of %d: %w", used, n, err)
			}
		}
		if err := q.DisableNotify(m); err != nil {
			return err
		}
	}
	return nil
}

// TestRingThreads runs the benchmark's driver and device on two threads for
// a short while in every mode: under make test's -race it checks that the
// driver's stores and govm's queue code are ordered (no data race), and in
// notify mode that no kick or interrupt is lost (a lost one fails the run
// after hangAfter instead of hanging).
func TestRingThreads(t *testing.T) {
	cpus := twoCPUs(t)
	for _, poll := range []bool{true, false} {
		for _, l := range []ringsim.Layout{ringsim.Split, ringsim.Packed} {
			s := ringBenchScenario(l, poll)
			_, kicks, irqs := ringRun(t, cpus, s, 20000)
			if !poll && (kicks == 0 || irqs == 0) {
				t.Errorf("%s with notifications: %d kicks, %d interrupts for 20000 buffers", l, kicks, irqs)
			}
		}
	}
}

// BenchmarkRing reports buffers per second through a split and a packed
// ring, polling and with notifications, and each mode's packed/split
// ratio beside the simulator's prediction for the same scenario.
func BenchmarkRing(b *testing.B) {
	cpus := twoCPUs(b)
	for _, poll := range []bool{true, false} {
		mode := "notify"
		if poll {
			mode = "poll"
		}
		var rate [2]float64
		for i, l := range []ringsim.Layout{ringsim.Split, ringsim.Packed} {
			s := ringBenchScenario(l, poll)
			var sim [2]float64 // lagging device, eager device
			for j, eager := range []bool{false, true} {
				se := s
				se.Eager = eager
				r, err := ringsim.Run(se)
				if err != nil {
					b.Fatal(err)
				}
				sim[j] = r.Total
			}
			b.Run(mode+"/"+string(l), func(b *testing.B) {
				n := b.N * 10000
				d, kicks, irqs := ringRun(b, cpus, s, n)
				rate[i] = float64(n) / d.Seconds()
				b.ReportMetric(float64(kicks)/float64(n), "kicks/buffer")
				b.ReportMetric(float64(irqs)/float64(n), "irqs/buffer")
				b.ReportMetric(rate[i], "buffers/s")
				b.ReportMetric(float64(d.Nanoseconds())/float64(n), "ns/buffer")
				b.ReportMetric(sim[0], "sim-transfers/buffer")
				b.ReportMetric(sim[1], "sim-eager-transfers/buffer")
			})
		}
		if rate[0] > 0 {
			b.Logf("%s: packed/split %.3f buffers/s", mode, rate[1]/rate[0])
		}
	}
}

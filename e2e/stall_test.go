package e2e

// Judging a flood's stalls without a wall-clock verdict. A second with no
// progress on a 2-core host shared with CI and fuzzers is usually the host
// (issue 8: a guest flood stalled 2.9 s; a thread sample of a 2 s one had
// govm's vCPU runnable and waiting for a CPU for 1.2 s of each second). A
// lost kick or interrupt, or a govm thread stuck on a lock, is a stall in
// which govm had the CPU it asked for. So each stretch without progress is
// judged by what the host's scheduler gave govm's threads over it: excused
// when one of them spent at least half of it waiting runnable, or was
// stopped (SIGSTOP, a debugger); a failure otherwise, however loaded the
// host.

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
)

// stall is one stretch without progress.
type stall struct {
	from, to time.Duration // since the judge started
	share    guestrun.CPUShare
	stopped  bool // a govm thread was seen stopped during it
}

// hostStarved: one of govm's threads was off the CPU against its will for
// at least half the stretch (waited runnable), or a thread was stopped.
// One thread, not the sum: a vCPU spinning on a full ring is preempted now
// and then on a busy host, and its waits plus every idle thread's small
// ones would excuse a stall govm made itself (seen with a delayed kick).
func (s stall) hostStarved() bool {
	return s.stopped || s.share.MaxWait >= (s.to-s.from)/2
}

func (s stall) String() string {
	stopped := ""
	if s.stopped {
		stopped = "; a govm thread was seen stopped"
	}
	return fmt.Sprintf("no progress from %v to %v into the flood (%v); govm: %v%s",
		s.from.Round(100*time.Millisecond), s.to.Round(100*time.Millisecond), (s.to - s.from).Round(time.Millisecond), s.share, stopped)
}

// stallJudge finds stretches of at least min in which the progress
// counters did not all move. Feed it samples in time order.
type stallJudge struct {
	min     time.Duration
	start   time.Time
	at      time.Time         // the last progress point
	counts  []uint64          // counters then
	threads []guestrun.Thread // govm's threads then
	stopped bool              // a thread seen stopped since
}

func newStallJudge(min time.Duration, now time.Time, counts []uint64, threads []guestrun.Thread) *stallJudge {
	return &stallJudge{min: min, start: now, at: now, counts: counts, threads: threads}
}

// observe takes one sample. A sample at which every counter moved since
// the last progress point is a new progress point; it returns the stretch
// since the previous one when that was at least min long.
func (j *stallJudge) observe(now time.Time, counts []uint64, threads []guestrun.Thread) *stall {
	for _, t := range threads {
		if t.State == "T" || t.State == "t" {
			j.stopped = true
		}
	}
	for i, c := range counts {
		if c == j.counts[i] {
			return nil
		}
	}
	return j.progress(now, counts, threads)
}

// finish ends the watch: a stretch still open counts as a stall.
func (j *stallJudge) finish(now time.Time, threads []guestrun.Thread) *stall {
	return j.progress(now, j.counts, threads)
}

func (j *stallJudge) progress(now time.Time, counts []uint64, threads []guestrun.Thread) *stall {
	var s *stall
	if now.Sub(j.at) >= j.min {
		s = &stall{from: j.at.Sub(j.start), to: now.Sub(j.start), share: guestrun.Share(j.threads, threads), stopped: j.stopped}
	}
	j.at, j.counts, j.threads, j.stopped = now, counts, threads, false
	return s
}

// tapRXPackets reads the frames the tap received from govm (the guest's
// transmissions) from /proc/PID/net/dev, which shows the namespace of pid:
// cheap enough to sample ten times a second.
func tapRXPackets(pid int) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/dev", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) != tapName {
			continue
		}
		// Receive: bytes packets errs drop fifo frame compressed multicast.
		fs := strings.Fields(rest)
		if len(fs) < 2 {
			break
		}
		return strconv.ParseUint(fs[1], 10, 64)
	}
	return 0, fmt.Errorf("no %s in /proc/%d/net/dev", tapName, pid)
}

// TestStallJudge: stretches without progress are found at min, and judged
// by govm's threads: waiting runnable or stopped is the host's, running or
// sleeping is a failure.
func TestStallJudge(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// th is govm's two threads with cumulative run/wait in ms.
	th := func(vrun, vwait, orun, owait int, state string) []guestrun.Thread {
		return []guestrun.Thread{
			{TID: 1, Name: "vcpu0", State: state, Run: time.Duration(vrun) * time.Millisecond, Wait: time.Duration(vwait) * time.Millisecond},
			{TID: 2, Name: "govm", State: "S", Run: time.Duration(orun) * time.Millisecond, Wait: time.Duration(owait) * time.Millisecond},
		}
	}
	j := newStallJudge(time.Second, at(0), []uint64{0, 0}, th(0, 0, 0, 0, "R"))
	step := func(ms int, c0, c1 uint64, threads []guestrun.Thread) *stall {
		return j.observe(at(ms), []uint64{c0, c1}, threads)
	}
	if s := step(100, 10, 10, th(100, 0, 50, 0, "R")); s != nil {
		t.Fatalf("progress judged a stall: %v", s)
	}
	// One counter stuck for 0.9 s: too short.
	step(500, 20, 10, th(500, 0, 60, 0, "R"))
	if s := step(1000, 30, 20, th(1000, 0, 70, 0, "R")); s != nil {
		t.Fatalf("0.9 s judged a stall: %v", s)
	}
	// 2 s with the vCPU running and nobody waiting: govm's (or the
	// guest's) stall, whatever the host's load.
	step(2000, 30, 20, th(2000, 0, 70, 0, "R"))
	s := step(3000, 31, 21, th(3000, 0, 80, 0, "R"))
	if s == nil || s.hostStarved() || s.to-s.from != 2*time.Second {
		t.Fatalf("2 s of a running vCPU without progress: %v (starved %v), want a stall that is not the host's", s, s != nil && s.hostStarved())
	}
	// 2 s with govm's threads waiting runnable 1.5 s: the host.
	s = step(5000, 32, 22, th(3300, 1000, 100, 500, "R"))
	if s == nil || !s.hostStarved() {
		t.Fatalf("2 s waiting runnable: %v, want a stall the host caused", s)
	}
	// Stopped in between (SIGSTOP): the host, though nothing waited.
	step(5500, 32, 22, th(3300, 1000, 100, 500, "T"))
	s = step(7000, 33, 23, th(3400, 1000, 110, 500, "R"))
	if s == nil || !s.hostStarved() {
		t.Fatalf("stopped: %v, want a stall the host caused", s)
	}
	// The stopped mark does not carry over to the next stretch.
	s = step(9000, 34, 24, th(5400, 1000, 110, 500, "R"))
	if s == nil || s.hostStarved() {
		t.Fatalf("after the stopped stretch: %v, want a stall that is not the host's", s)
	}
	// Waits spread over threads (a spinning vCPU preempted now and then)
	// that add up to half the stretch but are less than half for any one
	// thread: not the host's.
	s = step(11000, 35, 25, th(6800, 1600, 120, 1100, "R"))
	if s == nil || s.hostStarved() {
		t.Fatalf("waits spread over threads: %v, want a stall that is not the host's", s)
	}
	// Still stuck when the watch ends: a stall.
	if s := j.finish(at(12500), th(8300, 1600, 120, 1100, "S")); s == nil || s.hostStarved() {
		t.Fatalf("open stretch at the end: %v, want a stall", s)
	}
}

package bench

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// Boot benchmarks: wall time from fork/exec of the VMM to the first byte the test
// kernel writes on COM1, for govm and for QEMU booting the same bzImage. Run with
//
//	go test -run '^$' -bench '^BenchmarkBoot' -benchtime 10x ./bench/
//
// See README.md for how to read the numbers.

// bootCmdline selects the test kernel's trivial "boot" test, which prints its
// RESULT and SUMMARY lines and exits through the debug-exit port.
const bootCmdline = "test=boot"

// bootSample is one boot's measurements.
type bootSample struct {
	firstByte time.Duration // Start to first serial byte
	summary   time.Duration // Start to the end of the guest's SUMMARY line
	exit      time.Duration // Start to the VMM being reaped
	rssKB     int64         // resident at the first byte (-1: process already gone)
	guestKB   int64         // of which guest RAM
	maxRSSKB  int64         // peak resident over the whole run (wait4 ru_maxrss)
	// startupCPU is govm's own report (--stats) of its CPU time before the
	// first KVM_RUN; -1 for QEMU, which has no such report.
	startupCPU time.Duration
}

// startupRE is govm's --stats line with its start-up CPU time.
var startupRE = regexp.MustCompile(`govm: stats: startup: ([0-9.]+) ms CPU before the first KVM_RUN`)

// boot runs one VMM to completion and checks the guest really passed: a first
// byte alone could be an error message.
func boot(argv []string, timeout time.Duration) (bootSample, error) {
	v, _, err := runChecked(argv, timeout)
	if err != nil {
		return bootSample{}, err
	}
	fb, err := v.FirstByte(0) // the run is over: the first byte came or never will
	if err != nil {
		return bootSample{}, err
	}
	_, sum, _ := v.LineAt("SUMMARY ") // present: runChecked checked it
	s := bootSample{firstByte: fb, summary: sum, exit: v.ExitAfter(), rssKB: -1, maxRSSKB: v.MaxRSSKB(), startupCPU: -1}
	if m := startupRE.FindStringSubmatch(v.Stderr()); m != nil {
		f, _ := strconv.ParseFloat(m[1], 64)
		s.startupCPU = time.Duration(f * float64(time.Millisecond))
	}
	if maps := v.FirstByteMem(); maps != nil {
		s.rssKB, s.guestKB, _ = SplitRSS(maps, guestRAMMB<<10)
	}
	return s, nil
}

// summary holds the medians of a series of boots.
type summary struct {
	firstByte, summary, exit time.Duration
	rssKB, guestKB, maxRSSKB int64
	memSamples               int
	startupCPU               time.Duration // -1 when no run reported it
}

func summarize(ss []bootSample) summary {
	var fb, sum, ex []time.Duration
	var rss, guest, maxRSS []int64
	var startup []time.Duration
	for _, s := range ss {
		if s.startupCPU >= 0 {
			startup = append(startup, s.startupCPU)
		}
		fb = append(fb, s.firstByte)
		sum = append(sum, s.summary)
		ex = append(ex, s.exit)
		maxRSS = append(maxRSS, s.maxRSSKB)
		if s.rssKB >= 0 {
			rss = append(rss, s.rssKB)
			guest = append(guest, s.guestKB)
		}
	}
	sm := summary{
		firstByte: Median(fb), summary: Median(sum), exit: Median(ex),
		rssKB: Median(rss), guestKB: Median(guest),
		maxRSSKB: Median(maxRSS), memSamples: len(rss), startupCPU: -1,
	}
	if len(startup) > 0 {
		sm.startupCPU = Median(startup)
	}
	return sm
}

// report publishes one VMM's medians under a name prefix ("" or "govm-"/"qemu-").
func (s summary) report(b *testing.B, prefix string) {
	b.ReportMetric(ms(s.firstByte), prefix+"first-byte-ms")
	b.ReportMetric(ms(s.summary), prefix+"summary-ms")
	b.ReportMetric(ms(s.exit), prefix+"exit-ms")
	b.ReportMetric(mb(s.maxRSSKB), prefix+"maxrss-MB")
	if s.memSamples > 0 {
		b.ReportMetric(mb(s.rssKB), prefix+"rss-MB")
		b.ReportMetric(mb(s.rssKB-s.guestKB), prefix+"vmm-rss-MB")
	}
	if s.startupCPU >= 0 {
		b.ReportMetric(ms(s.startupCPU), prefix+"startup-cpu-ms")
	}
}

// runBoots boots argv b.N times and reports medians. ns/op is the mean wall time
// of a whole boot including exit.
func runBoots(b *testing.B, argv []string) {
	timeout := benchTimeout(b, 30*time.Second)
	var ss []bootSample
	for i := 0; i < b.N; i++ {
		s, err := boot(argv, timeout)
		if err != nil {
			b.Fatalf("boot %d of %s: %v", i, filepath.Base(argv[0]), err)
		}
		ss = append(ss, s)
	}
	summarize(ss).report(b, "")
}

// BenchmarkBoot measures each VMM alone.
func BenchmarkBoot(b *testing.B) {
	b.Run("qemu", func(b *testing.B) { runBoots(b, qemuArgv(b, testKernel(b), bootCmdline)) })
	b.Run("govm", func(b *testing.B) { runBoots(b, govmArgv(b, testKernel(b), bootCmdline, "--stats")) })
}

// BenchmarkBootCompare alternates govm and QEMU boots so both see the same host
// load (2 shared cores), and reports the ratio of their median first-byte times.
// A ratio below 1 means govm reaches the guest's first output sooner.
func BenchmarkBootCompare(b *testing.B) {
	kernel := testKernel(b)
	govm, qemu := govmArgv(b, kernel, bootCmdline, "--stats"), qemuArgv(b, kernel, bootCmdline)
	timeout := benchTimeout(b, 30*time.Second)
	var gs, qs []bootSample
	for i := 0; i < b.N; i++ {
		for _, v := range []struct {
			argv []string
			out  *[]bootSample
		}{{govm, &gs}, {qemu, &qs}} {
			s, err := boot(v.argv, timeout)
			if err != nil {
				b.Fatalf("boot %d of %s: %v", i, filepath.Base(v.argv[0]), err)
			}
			*v.out = append(*v.out, s)
		}
	}
	g, q := summarize(gs), summarize(qs)
	g.report(b, "govm-")
	q.report(b, "qemu-")
	if q.firstByte > 0 {
		b.ReportMetric(float64(g.firstByte)/float64(q.firstByte), "govm/qemu-first-byte")
	}
}

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Boot benchmarks: wall time from fork/exec of the VMM to the first byte the test
// kernel writes on COM1, for govm and for QEMU booting the same bzImage. Run with
//
//	go test -run '^$' -bench Boot -benchtime 10x ./bench/
//
// See README.md for how to read the numbers.

const (
	// guestRAMMB is the guest RAM both VMMs are given; SplitRSS uses it to find
	// the guest RAM mapping.
	guestRAMMB = 256
	// bootCmdline selects the test kernel's trivial "boot" test, which prints its
	// RESULT and SUMMARY lines and exits through the debug-exit port.
	bootCmdline = "test=boot"
)

// bootTimeout bounds each boot. Guest CPL0 code is emulated on our hosts (~1M
// instructions/s), so a few seconds is generous for the test kernel but not for a
// stock Linux. Override with GOVM_BENCH_TIMEOUT (a Go duration).
func bootTimeout(b *testing.B) time.Duration {
	if s := os.Getenv("GOVM_BENCH_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("GOVM_BENCH_TIMEOUT=%q: %v", s, err)
		}
		return d
	}
	return 30 * time.Second
}

// locate returns the file named by env var key, or def (relative to this
// package's directory, where go test runs), skipping the benchmark if it is absent.
func locate(b *testing.B, key, def, what string) string {
	p := os.Getenv(key)
	if p == "" {
		p = def
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		b.Fatalf("%s: %v", p, err)
	}
	if _, err := os.Stat(abs); err != nil {
		b.Skipf("%s not found at %s (build it, or set %s): %v", what, abs, key, err)
	}
	return abs
}

func testKernel(b *testing.B) string {
	return locate(b, "GOVM_TEST_KERNEL", "../guest/build/bzImage", "test kernel")
}

// govmArgv is the govm command line, with the same guest RAM as QEMU. GOVM_ARGS
// adds flags (space-separated).
func govmArgv(b *testing.B, kernel string) []string {
	bin := locate(b, "GOVM_BIN", "../bin/govm", "govm binary")
	argv := []string{bin, "run", "--kernel", kernel, "-m", fmt.Sprintf("%dM", guestRAMMB),
		"-p", bootCmdline, "--debug-exit"}
	return append(argv, strings.Fields(os.Getenv("GOVM_ARGS"))...)
}

// qemuArgv is the fastest QEMU configuration for a small guest on our hosts
// (HOST.md): qboot instead of SeaBIOS, no default devices, serial on stdout.
func qemuArgv(b *testing.B, kernel string) []string {
	bin := os.Getenv("QEMU_BIN")
	if bin == "" {
		bin = "qemu-system-x86_64"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		b.Skipf("QEMU not found (apt-get install qemu-system-x86, or set QEMU_BIN): %v", err)
	}
	const qboot = "/usr/share/qemu/qboot.rom"
	if _, err := os.Stat(qboot); err != nil {
		b.Skipf("%s not found (package qemu-system-data): %v", qboot, err)
	}
	return []string{path, "-accel", "kvm", "-cpu", "host,-arch-capabilities",
		"-m", fmt.Sprintf("%dM", guestRAMMB), "-nographic", "-no-reboot", "-bios", qboot,
		"-kernel", kernel, "-append", bootCmdline,
		"-device", "isa-debug-exit,iobase=0x501,iosize=2",
		"-serial", "stdio", "-display", "none", "-nodefaults"}
}

// bootSample is one boot's measurements.
type bootSample struct {
	firstByte time.Duration // Start to first serial byte
	summary   time.Duration // Start to the end of the guest's SUMMARY line
	exit      time.Duration // Start to the VMM being reaped
	rssKB     int64         // resident at the first byte (-1: process already gone)
	guestKB   int64         // of which guest RAM
	maxRSSKB  int64         // peak resident over the whole run (wait4 ru_maxrss)
}

// boot runs one VMM to completion and checks the guest really passed: a first
// byte alone could be an error message.
func boot(argv []string, timeout time.Duration) (bootSample, error) {
	p, err := Start(argv[0], argv[1:]...)
	if err != nil {
		return bootSample{}, err
	}
	defer p.Kill()
	fb, err := p.FirstByte(timeout)
	if err != nil {
		return bootSample{}, fmt.Errorf("%w\nserial: %q\nstderr: %s", err, p.Output(), p.Stderr())
	}
	status, err := p.Wait(timeout)
	if err != nil {
		return bootSample{}, fmt.Errorf("%w\nserial: %q\nstderr: %s", err, p.Output(), p.Stderr())
	}
	if code, ok := DebugExit(status); !ok || code != 0 {
		return bootSample{}, fmt.Errorf("exit status %d is not debug-exit code 0\nserial: %q\nstderr: %s",
			status, p.Output(), p.Stderr())
	}
	rep, err := ParseOutput(p.Output())
	if err != nil {
		return bootSample{}, err
	}
	if _, err := rep.Failed(); err != nil {
		return bootSample{}, fmt.Errorf("%w\nserial: %q", err, p.Output())
	}
	_, sum, _ := p.LineAt("SUMMARY ") // present: Failed checked it
	s := bootSample{firstByte: fb, summary: sum, exit: p.ExitAfter(), rssKB: -1, maxRSSKB: p.MaxRSSKB()}
	if maps := p.FirstByteMem(); maps != nil {
		s.rssKB, s.guestKB, _ = SplitRSS(maps, guestRAMMB<<10)
	}
	return s, nil
}

// summary holds the medians of a series of boots.
type summary struct {
	firstByte, summary, exit time.Duration
	rssKB, guestKB, maxRSSKB int64
	memSamples               int
}

func summarize(ss []bootSample) summary {
	var fb, sum, ex []time.Duration
	var rss, guest, maxRSS []int64
	for _, s := range ss {
		fb = append(fb, s.firstByte)
		sum = append(sum, s.summary)
		ex = append(ex, s.exit)
		maxRSS = append(maxRSS, s.maxRSSKB)
		if s.rssKB >= 0 {
			rss = append(rss, s.rssKB)
			guest = append(guest, s.guestKB)
		}
	}
	return summary{
		firstByte: Median(fb), summary: Median(sum), exit: Median(ex),
		rssKB: Median(rss), guestKB: Median(guest),
		maxRSSKB: Median(maxRSS), memSamples: len(rss),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mb(kb int64) float64        { return float64(kb) / 1024 }

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
}

// runBoots boots argv b.N times and reports medians. ns/op is the mean wall time
// of a whole boot including exit.
func runBoots(b *testing.B, argv []string) {
	timeout := bootTimeout(b)
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
	b.Run("qemu", func(b *testing.B) { runBoots(b, qemuArgv(b, testKernel(b))) })
	b.Run("govm", func(b *testing.B) { runBoots(b, govmArgv(b, testKernel(b))) })
}

// BenchmarkBootCompare alternates govm and QEMU boots so both see the same host
// load (2 shared cores), and reports the ratio of their median first-byte times.
// A ratio below 1 means govm reaches the guest's first output sooner.
func BenchmarkBootCompare(b *testing.B) {
	kernel := testKernel(b)
	govm, qemu := govmArgv(b, kernel), qemuArgv(b, kernel)
	timeout := bootTimeout(b)
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

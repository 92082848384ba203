package bench

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
)

// Block benchmark: the test kernel's blk-bench (guest/tests/blkbench.c) under
// govm and QEMU, on the same pattern image, with identical guest code. Run with
//
//	go test -run '^$' -bench Blk -benchtime 3x ./bench/
//
// See README.md for how to read the numbers.

const (
	// blkCmdline is guest/tests.cfg's [blk-bench] command line: each of the four
	// phases runs for bench.ms of guest TSC time.
	blkCmdline = "test=blk-bench bench.ms=2000"
	// blkPhase is bench.ms, the host pread loop's duration too.
	blkPhase = 2 * time.Second
	// blkSeqBytes is blk-bench-seq's request size, the host loop's read size.
	blkSeqBytes = 1 << 20
	// blkImageMB is the [blk-bench] disk size: larger than the guest's RAM, so
	// random reads cannot all be served from a guest-side cache (the test kernel
	// has none anyway) and span real page-cache pages on the host.
	blkImageMB = 256
)

// blkPhases are the RESULT lines blk-bench prints, and the short names the
// metrics use.
var blkPhases = []struct{ result, short string }{
	{"blk-bench-rand-qd1", "qd1"},
	{"blk-bench-rand-qd1-poll", "qd1-poll"},
	{"blk-bench-rand-qd32", "qd32"},
	{"blk-bench-seq", "seq"},
}

// blkSample is one run's numbers per phase, as the guest measured them.
type blkSample struct {
	iops, mbps, kicks1k, irqs1k [4]int64
}

// blkRun runs one VMM on blk-bench and collects the guest's figures. runChecked
// has already insisted on a clean pass, which for blk-bench includes bad=0 (every
// request's data passed the pattern spot check).
func blkRun(argv []string, timeout time.Duration) (blkSample, error) {
	var s blkSample
	_, o, err := runChecked(argv, timeout)
	if err != nil {
		return s, err
	}
	for i, ph := range blkPhases {
		r, ok := o.Results[ph.result]
		if !ok {
			return s, fmt.Errorf("no RESULT %s\nserial: %q", ph.result, o.Serial)
		}
		for _, f := range []struct {
			key string
			dst *int64
		}{{"iops", &s.iops[i]}, {"mbps", &s.mbps[i]}, {"kicks_per_1k", &s.kicks1k[i]}, {"irqs_per_1k", &s.irqs1k[i]}} {
			if *f.dst, err = r.Int(f.key); err != nil {
				return s, err
			}
		}
	}
	return s, nil
}

// blkMedians holds per-phase medians over a VMM's runs.
type blkMedians struct {
	iops, mbps, kicks1k, irqs1k [4]float64
}

func blkSummarize(ss []blkSample) blkMedians {
	var m blkMedians
	for i := range blkPhases {
		var iops, mbps, kicks, irqs []float64
		for _, s := range ss {
			iops = append(iops, float64(s.iops[i]))
			mbps = append(mbps, float64(s.mbps[i]))
			kicks = append(kicks, float64(s.kicks1k[i]))
			irqs = append(irqs, float64(s.irqs1k[i]))
		}
		m.iops[i], m.mbps[i], m.kicks1k[i], m.irqs1k[i] = Median(iops), Median(mbps), Median(kicks), Median(irqs)
	}
	return m
}

// Phase indexes into blkPhases and the sample arrays.
const (
	blkQD1 = iota
	blkQD1Poll
	blkQD32
	blkSeq
)

// report publishes one VMM's medians with prefix "govm-" or "qemu-". Random
// phases are reported in IOPS, the sequential one in MB/s (10^6 bytes/s, as the
// guest computes it); kicks and interrupts per 1000 requests for all of them.
func (m blkMedians) report(b *testing.B, prefix string) {
	b.ReportMetric(m.iops[blkQD1], prefix+"qd1-IOPS")
	b.ReportMetric(m.iops[blkQD1Poll], prefix+"qd1-poll-IOPS")
	b.ReportMetric(m.iops[blkQD32], prefix+"qd32-IOPS")
	b.ReportMetric(m.mbps[blkSeq], prefix+"seq-MB/s")
	for i, ph := range blkPhases {
		b.ReportMetric(m.kicks1k[i], prefix+ph.short+"-kicks/1k")
		b.ReportMetric(m.irqs1k[i], prefix+ph.short+"-irqs/1k")
	}
}

// blkImage writes the [blk-bench] pattern image and returns its path and digest.
func blkImage(b *testing.B) (string, [sha256.Size]byte) {
	path := filepath.Join(b.TempDir(), "blk-bench.img")
	if err := guestrun.WritePatternImage(path, blkImageMB<<20); err != nil {
		b.Fatal(err)
	}
	return path, fileDigest(b, path)
}

func fileDigest(b *testing.B, path string) [sha256.Size]byte {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		b.Fatal(err)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// BenchmarkBlk runs blk-bench under govm and QEMU in alternation (the order
// flips every iteration), so both see the same host load and page-cache state,
// and reports per-VMM medians and govm/QEMU ratios. One iteration is one run of
// each VMM plus the host pread loop, about 20 s.
//
// Both VMMs serve the disk through the host page cache: govm's backend is plain
// pread/pwrite on the image, so QEMU gets its default cache=writeback (not
// cache=none, which would be O_DIRECT and measure the host disk instead).
func BenchmarkBlk(b *testing.B) {
	kernel := testKernel(b)
	img, digest := blkImage(b)
	govm := govmArgv(b, kernel, blkCmdline, "--no-default-params", "--disk", img)
	qemu := qemuArgv(b, kernel, blkCmdline,
		"-drive", "file="+img+",if=none,id=d0,format=raw,cache=writeback",
		"-device", "virtio-blk-pci,drive=d0,disable-modern=on")
	timeout := benchTimeout(b, 120*time.Second) // tests.cfg [blk-bench] timeout
	b.ResetTimer()
	var gs, qs []blkSample
	var hs []float64 // host pread loop, MB/s
	for i := 0; i < b.N; i++ {
		runs := []struct {
			argv []string
			out  *[]blkSample
		}{{govm, &gs}, {qemu, &qs}}
		if i%2 == 1 {
			runs[0], runs[1] = runs[1], runs[0]
		}
		for _, r := range runs {
			s, err := blkRun(r.argv, timeout)
			if err != nil {
				b.Fatalf("run %d of %s: %v", i, filepath.Base(r.argv[0]), err)
			}
			*r.out = append(*r.out, s)
			b.Logf("run %d %s: qd1 %d IOPS, qd1-poll %d IOPS, qd32 %d IOPS, seq %d MB/s", i,
				filepath.Base(r.argv[0]), s.iops[blkQD1], s.iops[blkQD1Poll], s.iops[blkQD32], s.mbps[blkSeq])
		}
		mbps, err := hostSeqRead(img, blkSeqBytes, blkPhase)
		if err != nil {
			b.Fatal(err)
		}
		hs = append(hs, mbps)
		b.Logf("run %d host pread loop: seq %.0f MB/s", i, mbps)
	}
	b.StopTimer()
	if d := fileDigest(b, img); !bytes.Equal(d[:], digest[:]) {
		b.Fatal("blk-bench only reads, but the image changed") // tests.cfg: disk_after = unchanged
	}
	g, q := blkSummarize(gs), blkSummarize(qs)
	g.report(b, "govm-")
	q.report(b, "qemu-")
	for i, ph := range blkPhases {
		r, spread := pairRatio(gs, qs, i)
		b.ReportMetric(r, "govm/qemu-"+ph.short)
		b.ReportMetric(spread, "govm/qemu-"+ph.short+"-spread")
	}
	b.ReportMetric(Median(hs), "host-seq-MB/s")
	b.ReportMetric(hostRatio(gs, hs), "govm/host-seq")
	b.ReportMetric(hostRatio(qs, hs), "qemu/host-seq")
}

// hostSeqRead is the physical limit for blk-bench-seq: one thread pread()ing
// the image front to back (wrapping at the end) in size-byte reads for d, from
// the page cache the VMMs' runs just used, no VMM in between. It returns MB/s
// (10^6 bytes/s, as the guest counts).
func hostSeqRead(path string, size int, d time.Duration) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, size)
	var off, total int64
	start := time.Now()
	for time.Since(start) < d {
		n, err := f.ReadAt(buf, off)
		total += int64(n)
		off += int64(n)
		if err == io.EOF || n == 0 {
			off = 0
		} else if err != nil {
			return 0, fmt.Errorf("host pread %s at %d: %w", path, off, err)
		}
	}
	return float64(total) / time.Since(start).Seconds() / 1e6, nil
}

// hostRatio is the median over iterations of a VMM's sequential MB/s divided by
// the host pread loop's in the same iteration.
func hostRatio(ss []blkSample, hs []float64) float64 {
	var rs []float64
	for j := range min(len(ss), len(hs)) {
		if hs[j] > 0 {
			rs = append(rs, float64(ss[j].mbps[blkSeq])/hs[j])
		}
	}
	return Median(rs)
}

// pairRatio is the median over iterations of govm's figure divided by QEMU's in
// the same iteration (IOPS for the random phases, MB/s for the sequential one).
// The two runs of a pair are back to back, so a ratio of pairs follows the host's
// changing load better than a ratio of two medians taken over all runs.
func pairRatio(gs, qs []blkSample, phase int) (ratio, spread float64) {
	var rs []float64
	for j := range min(len(gs), len(qs)) {
		g, q := gs[j].iops[phase], qs[j].iops[phase]
		if phase == blkSeq {
			g, q = gs[j].mbps[phase], qs[j].mbps[phase]
		}
		if q > 0 {
			rs = append(rs, float64(g)/float64(q))
		}
	}
	return Median(rs), Spread(rs)
}

// TestBlkRun checks the collection and medians on a fake VMM printing blk-bench's
// lines (only the keys used, plus the counters the guest really prints).
func TestBlkRun(t *testing.T) {
	script := func(qd1 int) string {
		return fmt.Sprintf(`echo 'RESULT blk-bench-rand-qd1 pass reqs=1 iops=%d mbps=10 kicks_per_1k=999 irqs_per_1k=998 bad=0'
echo 'RESULT blk-bench-rand-qd1-poll pass iops=9000 mbps=36 kicks_per_1k=1000 irqs_per_1k=0 poll=1'
echo 'RESULT blk-bench-rand-qd32 pass iops=40000 mbps=160 kicks_per_1k=31 irqs_per_1k=30'
echo 'RESULT blk-bench-seq pass iops=2700 mbps=2800 kicks_per_1k=250 irqs_per_1k=247'
echo 'SUMMARY pass=4 fail=0 skip=0'; exit 1`, qd1)
	}
	var ss []blkSample
	for _, qd1 := range []int{2500, 100, 2600} {
		s, err := blkRun([]string{"/bin/sh", "-c", script(qd1)}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	m := blkSummarize(ss)
	if m.iops[blkQD1] != 2500 || m.iops[blkQD1Poll] != 9000 || m.irqs1k[blkQD1Poll] != 0 ||
		m.iops[blkQD32] != 40000 || m.mbps[blkSeq] != 2800 || m.kicks1k[blkQD1] != 999 ||
		m.irqs1k[blkQD1] != 998 || m.kicks1k[blkSeq] != 250 || m.irqs1k[blkQD32] != 30 {
		t.Errorf("medians = %+v", m)
	}
	qs := []blkSample{{iops: [4]int64{1000, 3000, 20000, 0}, mbps: [4]int64{0, 0, 0, 4000}},
		{iops: [4]int64{5000, 9000, 1, 0}, mbps: [4]int64{0, 0, 0, 0}}}
	// Pairs: qd1 2500/1000, 100/5000; the third govm run has no partner.
	if r, sp := pairRatio(ss, qs, blkQD1); r != (2.5+0.02)/2 || sp != (2.5-0.02)/r {
		t.Errorf("pairRatio(qd1) = %v, %v; want 1.26 and a spread of 2.48/1.26", r, sp)
	}
	if r, sp := pairRatio(ss, qs, blkQD1Poll); r != 2 || sp != 1 { // 9000/3000, 9000/9000
		t.Errorf("pairRatio(qd1-poll) = %v, %v; want 2, spread (3-1)/2", r, sp)
	}
	if r, sp := pairRatio(ss, qs, blkSeq); r != 0.7 || sp != 0 { // 2800/4000; the zero-MB/s QEMU run is left out
		t.Errorf("pairRatio(seq) = %v, %v; want 0.7, no spread from one pair", r, sp)
	}
	// Against the host loop: 2800/5600, 2800/2800; the zero host figure is left out.
	if r := hostRatio(ss, []float64{5600, 2800, 0}); r != 0.75 {
		t.Errorf("hostRatio = %v, want 0.75", r)
	}
	// A phase missing, or a key missing, is an error rather than a zero.
	for _, bad := range []string{
		"echo 'RESULT blk-bench-rand-qd1 pass iops=1 mbps=1 kicks_per_1k=1 irqs_per_1k=1'; echo 'SUMMARY pass=1 fail=0 skip=0'; exit 1",
		"echo 'RESULT blk-bench-rand-qd1 pass iops=1 mbps=1 kicks_per_1k=1 irqs_per_1k=1'; " +
			"echo 'RESULT blk-bench-rand-qd32 pass iops=1 mbps=1 kicks_per_1k=1 irqs_per_1k=1'; " +
			"echo 'RESULT blk-bench-seq pass iops=1 mbps=1 kicks_per_1k=1 irqs_per_1k=1'; echo 'SUMMARY pass=3 fail=0 skip=0'; exit 1",
		"echo 'RESULT blk-bench-rand-qd1 pass iops=1'; echo 'RESULT blk-bench-rand-qd1-poll pass'; echo 'RESULT blk-bench-rand-qd32 pass'; " +
			"echo 'RESULT blk-bench-seq pass'; echo 'SUMMARY pass=4 fail=0 skip=0'; exit 1",
	} {
		if _, err := blkRun([]string{"/bin/sh", "-c", bad}, 5*time.Second); err == nil {
			t.Errorf("blkRun accepted %q", bad)
		}
	}
}

// TestHostSeqRead: the host loop reads the file (wrapping at its end) and
// reports a rate; a missing file is an error.
func TestHostSeqRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(path, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	mbps, err := hostSeqRead(path, 1<<20, 20*time.Millisecond)
	if err != nil || mbps <= 0 {
		t.Errorf("hostSeqRead = %v, %v", mbps, err)
	}
	if _, err := hostSeqRead(filepath.Join(t.TempDir(), "none"), 1<<20, time.Millisecond); err == nil {
		t.Error("hostSeqRead of a missing file succeeded")
	}
}

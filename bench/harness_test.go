package bench

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []int64
		want int64
	}{{nil, 0}, {[]int64{5}, 5}, {[]int64{9, 1, 5}, 5}, {[]int64{4, 1, 3, 2}, 2}, {[]int64{100, 1, 2}, 2}} {
		in := append([]int64(nil), tc.in...)
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %d, want %d", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Fatalf("Median reordered its input: %v", tc.in)
			}
		}
	}
	if got := Median([]time.Duration{3 * time.Millisecond, time.Millisecond}); got != 2*time.Millisecond {
		t.Errorf("Median(durations) = %v, want 2ms", got)
	}
}

const smapsSample = `00400000-00800000 r-xp 00000000 08:01 1234  /usr/bin/qemu-system-x86_64
Size:               4096 kB
Rss:                3000 kB
7f0000000000-7f0010000000 rw-p 00000000 00:00 0
Size:             262144 kB
Rss:                2048 kB
7f1000000000-7f1000200000 rw-p 00000000 00:00 0
Rss:                1024 kB
7f2000000000-7f2000100000 rw-p 00000000 00:00 0                          [heap]
Rss:                 512 kB
7f3000000000-7f3040000000 ---p 00000000 00:00 0
Rss:                   4 kB
`

func TestSmapsSplitRSS(t *testing.T) {
	maps, err := parseSmaps(smapsSample)
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) != 5 || maps[0].Anon || !maps[1].Anon || !maps[3].Anon || maps[1].SizeKB != 262144 {
		t.Fatalf("parseSmaps = %+v", maps)
	}
	for _, tc := range []struct {
		ramKB             int64
		total, guest, vmm int64
	}{
		{256 << 10, 6588, 2048, 4540}, // the 256 MiB mapping is guest RAM
		{1 << 20, 6588, 4, 6584},      // 1 GiB: only the 1 GiB PROT_NONE reservation matches
		{128 << 10, 6588, 0, 6588},    // no mapping of that shape
	} {
		total, guest, vmm := SplitRSS(maps, tc.ramKB)
		if total != tc.total || guest != tc.guest || vmm != tc.vmm {
			t.Errorf("SplitRSS(ram=%d) = %d, %d, %d; want %d, %d, %d",
				tc.ramKB, total, guest, vmm, tc.total, tc.guest, tc.vmm)
		}
	}
	if _, err := parseSmaps("ffff-0000 rw-p 0 00:00 0\n"); err == nil {
		t.Error("parseSmaps accepted end < start")
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\tqemu\nVmHWM:\t   40000 kB\nVmRSS:\t   35000 kB\nThreads:\t4\n"
	for _, tc := range []struct {
		field string
		want  int64
		ok    bool
	}{{"VmRSS", 35000, true}, {"VmHWM", 40000, true}, {"Threads", -1, false}, {"VmSwap", -1, false}} {
		got, err := parseStatusKB(status, tc.field)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseStatusKB(%s) = %d, %v; want %d ok=%v", tc.field, got, err, tc.want, tc.ok)
		}
	}
	if n, err := ReadStatusKB(os.Getpid(), "VmRSS"); err != nil || n <= 0 {
		t.Errorf("ReadStatusKB(self, VmRSS) = %d, %v", n, err)
	}
}

// TestStartSamplesMemory checks that the first-byte hook sees the live VMM
// (/bin/sh standing in for one, kept alive after its first byte).
func TestStartSamplesMemory(t *testing.T) {
	v, err := Start("/bin/sh", "-c", "echo hi; sleep 0.2; echo 'RESULT a pass'; echo 'SUMMARY pass=1 fail=0 skip=0'")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.FirstByte(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	maps := v.FirstByteMem()
	total, _, _ := SplitRSS(maps, 1<<30)
	if len(maps) == 0 || total <= 0 {
		t.Fatalf("FirstByteMem = %d mappings, %d KiB resident", len(maps), total)
	}
	if status, err := v.Wait(5 * time.Second); err != nil || status != 0 {
		t.Fatalf("Wait = %d, %v", status, err)
	}
	if err := v.Output().Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	if _, err := Start(); err == nil {
		t.Error("Start with no command succeeded")
	}
}

// TestRunChecked: a measurement counts only when the guest exited through the
// debug-exit port with code 0 and reported a clean pass.
func TestRunChecked(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		wantErr      error // nil: accepted
		ok           bool
	}{
		{"clean", "echo 'RESULT a pass'; echo 'SUMMARY pass=1 fail=0 skip=0'; exit 1", nil, true},
		{"guest code 1", "echo 'RESULT a pass'; echo 'SUMMARY pass=1 fail=0 skip=0'; exit 3", nil, false},
		{"plain exit 0", "echo 'RESULT a pass'; echo 'SUMMARY pass=1 fail=0 skip=0'; exit 0", nil, false},
		{"failed result", "echo 'RESULT a fail'; echo 'SUMMARY pass=0 fail=1 skip=0'; exit 1", guestrun.ErrGuestFailed, false},
		{"malformed", "echo 'RESULT a pass b'; echo 'SUMMARY pass=0 fail=0 skip=0'; exit 1", guestrun.ErrMalformed, false},
		{"hang", "sleep 30", guestrun.ErrTimeout, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, o, err := runChecked([]string{"/bin/sh", "-c", tc.script}, 500*time.Millisecond)
			if tc.ok {
				if err != nil || v == nil || !o.Results["a"].Pass {
					t.Fatalf("runChecked: %v", err)
				}
				return
			}
			if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("runChecked err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

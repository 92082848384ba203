package bench

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseResult(t *testing.T) {
	for _, tc := range []struct {
		line    string
		want    Result
		wantErr bool
	}{
		{line: "RESULT boot pass", want: Result{Name: "boot", Pass: true, Values: map[string]string{}}},
		{line: "RESULT blk-basic fail irqs=3 msg_hex=6869\r",
			want: Result{Name: "blk-basic", Values: map[string]string{"irqs": "3", "msg_hex": "6869"},
				Keys: []string{"irqs", "msg_hex"}}},
		{line: "RESULT x pass k=", want: Result{Name: "x", Pass: true, Values: map[string]string{"k": ""}, Keys: []string{"k"}}},
		{line: "RESULT boot", wantErr: true},
		{line: "RESULT boot ok", wantErr: true},
		{line: "RESULTS boot pass", wantErr: true},
		{line: "RESULT boot pass novalue", wantErr: true},
		{line: "RESULT boot pass =v", wantErr: true},
		{line: "RESULT boot pass a=1 a=2", wantErr: true},
		{line: "", wantErr: true},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, err := ParseResult(tc.line)
			if tc.wantErr {
				if !errors.Is(err, ErrBadResult) {
					t.Fatalf("ParseResult(%q) err = %v, want ErrBadResult", tc.line, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseResult(%q): %v", tc.line, err)
			}
			if got.Name != tc.want.Name || got.Pass != tc.want.Pass || len(got.Values) != len(tc.want.Values) ||
				strings.Join(got.Keys, ",") != strings.Join(tc.want.Keys, ",") {
				t.Fatalf("ParseResult(%q) = %+v, want %+v", tc.line, got, tc.want)
			}
			for k, v := range tc.want.Values {
				if got.Values[k] != v {
					t.Errorf("value %s = %q, want %q", k, got.Values[k], v)
				}
			}
		})
	}
}

func TestResultAccessors(t *testing.T) {
	r, err := ParseResult("RESULT net pass pps=12000 mask=0x10 bad=1x msg_hex=61206220 odd_hex=abc")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key     string
		want    int64
		wantErr bool
	}{{"pps", 12000, false}, {"mask", 16, false}, {"bad", 0, true}, {"missing", 0, true}} {
		got, err := r.Int(tc.key)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("Int(%s) = %d, %v; want %d, err=%v", tc.key, got, err, tc.want, tc.wantErr)
		}
	}
	if s, err := r.Text("msg"); err != nil || s != "a b " {
		t.Errorf("Text(msg) = %q, %v; want \"a b \"", s, err)
	}
	if _, err := r.Text("odd"); !errors.Is(err, ErrBadResult) {
		t.Errorf("Text(odd) err = %v, want ErrBadResult", err)
	}
}

func TestParseSummary(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Summary
		ok   bool
	}{
		{"SUMMARY pass=3 fail=1", Summary{3, 1}, true},
		{"SUMMARY fail=0 pass=2", Summary{2, 0}, true},
		{"SUMMARY pass=3", Summary{}, false},
		{"SUMMARY pass=3 pass=1", Summary{}, false},
		{"SUMMARY pass=-1 fail=0", Summary{}, false},
		{"SUMMARY pass=x fail=0", Summary{}, false},
		{"SUMMARY pass=1 skip=0", Summary{}, false},
		{"SUMMARY pass=1 fail=0 extra=1", Summary{}, false},
	} {
		got, err := ParseSummary(tc.line)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSummary(%q) = %+v, %v; want %+v ok=%v", tc.line, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseOutputFailed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		out        string
		wantFailed string
		wantErr    bool
	}{
		{"clean", "qboot noise\r\nRESULT a pass\r\nRESULT b pass n=1\r\nSUMMARY pass=2 fail=0\r\n", "", false},
		{"failure", "RESULT a pass\nRESULT b fail\nSUMMARY pass=1 fail=1\n", "b", true},
		{"no summary", "RESULT a pass\n", "", true},
		{"summary lies", "RESULT a fail\nSUMMARY pass=1 fail=0\n", "a", true},
		{"empty", "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := ParseOutput(tc.out)
			if err != nil {
				t.Fatalf("ParseOutput: %v", err)
			}
			failed, err := rep.Failed()
			if (err != nil) != tc.wantErr || strings.Join(failed, ",") != tc.wantFailed {
				t.Fatalf("Failed() = %v, %v; want %q err=%v", failed, err, tc.wantFailed, tc.wantErr)
			}
		})
	}
	if _, err := ParseOutput("RESULT a maybe\n"); !errors.Is(err, ErrBadResult) {
		t.Errorf("malformed RESULT line: err = %v, want ErrBadResult", err)
	}
	rep, _ := ParseOutput("RESULT a pass k=v\nSUMMARY pass=1 fail=0\n")
	if r, ok := rep.Find("a"); !ok || r.Values["k"] != "v" {
		t.Errorf("Find(a) = %+v, %v", r, ok)
	}
	if _, ok := rep.Find("b"); ok {
		t.Error("Find(b) found a result that was never printed")
	}
}

// FuzzParseOutput feeds arbitrary guest serial output to the parser: it must never
// panic, and whatever it accepts must be internally consistent.
func FuzzParseOutput(f *testing.F) {
	f.Add("RESULT a pass k=v x_hex=41\nSUMMARY pass=1 fail=0\n")
	f.Add("RESULT  \x00 fail ==\r\nSUMMARY pass=99999999999999999999 fail=0")
	f.Fuzz(func(t *testing.T, out string) {
		rep, err := ParseOutput(out)
		if err != nil {
			return
		}
		for _, r := range rep.Results {
			if r.Name == "" || len(r.Keys) != len(r.Values) {
				t.Fatalf("inconsistent result %+v", r)
			}
			for _, k := range r.Keys {
				_, _ = r.Int(k)
				_, _ = r.Text(strings.TrimSuffix(k, "_hex"))
			}
		}
		if rep.Summary != nil && (rep.Summary.Pass < 0 || rep.Summary.Fail < 0) {
			t.Fatalf("negative summary %+v", rep.Summary)
		}
		_, _ = rep.Failed()
	})
}

func TestDebugExit(t *testing.T) {
	for _, tc := range []struct {
		status, code int
		ok           bool
	}{{1, 0, true}, {3, 1, true}, {255, 127, true}, {0, 0, false}, {2, 0, false}, {-1, 0, false}} {
		code, ok := DebugExit(tc.status)
		if code != tc.code || ok != tc.ok {
			t.Errorf("DebugExit(%d) = %d, %v; want %d, %v", tc.status, code, ok, tc.code, tc.ok)
		}
	}
}

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

// TestProc drives the process helpers with /bin/sh standing in for a VMM.
func TestProc(t *testing.T) {
	t.Run("lines and exit status", func(t *testing.T) {
		p, err := Start("/bin/sh", "-c", `sleep 0.05; printf 'boot\r\nRESULT a pass\r\npartial'; sleep 0.05; printf ' line\nSUMMARY pass=1 fail=0\n'; exit 3`)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := p.FirstByte(5 * time.Second)
		if err != nil || fb < 50*time.Millisecond {
			t.Fatalf("FirstByte = %v, %v; want >= 50ms (the script sleeps first)", fb, err)
		}
		if l, err := p.WaitLine("RESULT", 5*time.Second); err != nil || l != "RESULT a pass" {
			t.Fatalf("WaitLine(RESULT) = %q, %v", l, err)
		}
		if l, err := p.WaitLine("partial", 5*time.Second); err != nil || l != "partial line" {
			t.Fatalf("WaitLine(partial) = %q, %v; want the completed line", l, err)
		}
		_, atResult, ok1 := p.LineAt("RESULT")
		_, atPartial, ok2 := p.LineAt("partial")
		if !ok1 || !ok2 || atResult < fb || atPartial-atResult < 40*time.Millisecond {
			t.Errorf("LineAt: RESULT at %v, partial at %v (first byte %v); want partial >= 50ms later",
				atResult, atPartial, fb)
		}
		if _, _, ok := p.LineAt("SUMMARY pass=2"); ok {
			t.Error("LineAt found a line that was never printed")
		}
		status, err := p.Wait(5 * time.Second)
		if err != nil || status != 3 {
			t.Fatalf("Wait = %d, %v; want 3", status, err)
		}
		if code, ok := DebugExit(status); !ok || code != 1 {
			t.Errorf("DebugExit(3) = %d, %v", code, ok)
		}
		if p.ExitAfter() < fb || p.MaxRSSKB() <= 0 {
			t.Errorf("ExitAfter = %v (first byte %v), MaxRSSKB = %d", p.ExitAfter(), fb, p.MaxRSSKB())
		}
		if _, err := p.WaitLine("never", time.Second); !errors.Is(err, ErrExited) {
			t.Errorf("WaitLine after exit: err = %v, want ErrExited", err)
		}
	})
	t.Run("timeout kills by pid", func(t *testing.T) {
		p, err := Start("/bin/sleep", "30")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := p.FirstByte(100 * time.Millisecond); !errors.Is(err, ErrTimeout) {
			t.Fatalf("FirstByte err = %v, want ErrTimeout", err)
		}
		status, err := p.Wait(5 * time.Second)
		if err != nil || status != -1 || time.Since(start) > 5*time.Second {
			t.Fatalf("after timeout: Wait = %d, %v; want -1 (killed)", status, err)
		}
	})
	t.Run("stderr is kept", func(t *testing.T) {
		p, err := Start("/bin/sh", "-c", "echo oops >&2; exit 1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.FirstByte(5 * time.Second); !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "oops") {
			t.Fatalf("FirstByte err = %v, want ErrExited mentioning stderr", err)
		}
	})
	if _, err := Start("/nonexistent/vmm"); err == nil {
		t.Error("Start of a missing binary succeeded")
	}
}

package splat

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Lines as Linux prints them (taken from the printk formats named in
// classify.go), each with the Kind it must give.
var classifyCases = []struct {
	line string
	kind Kind // "" = not a splat
}{
	{"Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)", Panic},
	{"[    2.345678] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100", Panic},
	{"[    1.000000][    T1] Kernel panic - not syncing: sysrq triggered crash", Panic},
	{"[ T1] Kernel panic - not syncing: x", Panic},
	{"[    0.5] Kernel panic - not syncing: short stamp", Panic},
	{"---[ end Kernel panic - not syncing: VFS ]---", ""},
	{"BUG: kernel NULL pointer dereference, address: 0000000000000000", Bug},
	{"[   12.000001] BUG: scheduling while atomic: swapper/0/0/0x00000002", Bug},
	{"BUG: unable to handle page fault for address: ffffffffc0000000", Bug},
	{"BUG: KASAN: slab-out-of-bounds in kmalloc_oob_right+0x1b0/0x2b0", KASAN},
	{"[    3.1][    C1] KASAN: null-ptr-deref in range [0x0000000000000000-0x0000000000000007]", KASAN},
	{"Oops: 0002 [#1] PREEMPT SMP NOPTI", Oops},
	{"[    5.000000] Oops: general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1] SMP", Oops},
	{"general protection fault: 0000 [#1] SMP PTI", Oops},
	{"invalid opcode: 0000 [#2] PREEMPT SMP", Oops},
	{"WARNING: CPU: 0 PID: 1 at kernel/fork.c:123 copy_process+0x1/0x2", Warn},
	{"[    7.700000] WARNING: CPU: 1 PID: 0 at mm/page_alloc.c:4 warn_alloc", Warn},
	{"UBSAN: array-index-out-of-bounds in drivers/foo/bar.c:12:7", UBSAN},
	{"UBSAN: Undefined behaviour in lib/x.c:1:2", UBSAN},
	{"WARNING: possible circular locking dependency detected", Lockdep},
	{"WARNING: possible recursive locking detected", Lockdep},
	{"[ INFO: possible circular locking dependency detected ]", Lockdep},
	{"INFO: task kworker/u4:1:45 blocked for more than 120 seconds.", Hung},
	{"[  246.1] INFO: task sh:1 blocked for more than 122 seconds.", Hung},
	{"watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [swapper/0:1]", SoftLockup},
	{"rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", RCUStall},
	{"rcu: INFO: rcu_sched self-detected stall on CPU", RCUStall},
	{"INFO: rcu_sched detected stalls on CPUs/tasks: { 1} (detected by 0, t=5252 jiffies)", RCUStall},
	{"rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: {", RCUStall},
	// Near misses: not splats.
	{"Linux version 6.1.0-57-amd64 (debian-kernel@lists.debian.org)", ""},
	{"echo BUG: in a shell", ""},
	{"WARNING: something else", ""},
	{"INFO: task list", ""},
	{"[    1.234567 Kernel panic - not syncing: unterminated prefix", ""},
	{"[abc] BUG: not a printk prefix", ""},
	{"rcu: Hierarchical RCU implementation.", ""},
	{"kernel: 0000 [#1", ""},
	{"", ""},
}

func TestClassify(t *testing.T) {
	for _, c := range classifyCases {
		k, ok := Classify(c.line)
		if ok != (c.kind != "") || k != c.kind {
			t.Errorf("Classify(%q) = %q, %v; want %q", c.line, k, ok, c.kind)
		}
	}
}

func TestStripPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"[    1.234567] msg":                     "msg",
		"[    1.234567][    T1] msg":             "msg",
		"[    1.234567] [    T12] msg":           "msg",
		"[ T1] msg":                              "msg",
		"[    C3] msg":                           "msg",
		"[12345678.123456] msg":                  "msg",
		"msg":                                    "msg",
		"[x] msg":                                "[x] msg",
		"[1.2.3] msg":                            "[1.2.3] msg",
		"[" + strings.Repeat(" ", 40) + "1.0] m": "[" + strings.Repeat(" ", 40) + "1.0] m",
	} {
		if got := StripPrefix(in); got != want {
			t.Errorf("StripPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseKind(t *testing.T) {
	for _, k := range Kinds {
		if got, ok := ParseKind(string(k)); !ok || got != k {
			t.Errorf("ParseKind(%q) = %q, %v", k, got, ok)
		}
	}
	if k, ok := ParseKind("warning"); !ok || k != Warn {
		t.Errorf("ParseKind(warning) = %q, %v", k, ok)
	}
	if _, ok := ParseKind("nope"); ok {
		t.Error("ParseKind(nope) accepted")
	}
}

// fakeClock advances 1 ms per reading.
func fakeClock() func() time.Time {
	t0 := time.Unix(1000, 0)
	var n atomic.Int64
	return func() time.Time { return t0.Add(time.Duration(n.Add(1)) * time.Millisecond) }
}

// TestWatcherStream: both line endings, lines split across writes at every
// position, the splat callback, counts and the boot phases.
func TestWatcherStream(t *testing.T) {
	console := "early\r\n" +
		"[    0.000000] Linux version 6.1.0 (gcc)\n" +
		"[    0.100000] WARNING: CPU: 0 PID: 1 at a.c:1 f\r\n" +
		"[    0.100001] Call Trace:\r\n" +
		"[    1.000000] Run /init as init process\n" +
		"[    1.5] Freeing unused kernel image memory\n" +
		"READY-42\n" +
		"[    2.000000] Kernel panic - not syncing: boom\r\r\n"
	for split := 0; split <= len(console); split++ {
		var got []Splat
		w := New(Config{ReadyMarker: "READY-42", now: fakeClock(), OnSplat: func(s Splat) { got = append(got, s) }})
		w.Write([]byte(console[:split]))
		w.Write([]byte(console[split:]))
		if len(got) != 2 || got[0].Kind != Warn || got[1].Kind != Panic ||
			got[1].Line != "Kernel panic - not syncing: boom" {
			t.Fatalf("split %d: splats %+v", split, got)
		}
		if w.Count(Warn) != 1 || w.Count(Panic) != 1 || w.Count(Bug) != 0 {
			t.Fatalf("split %d: counts warn %d panic %d", split, w.Count(Warn), w.Count(Panic))
		}
		ph := w.Phases()
		for _, p := range []Phase{FirstByte, LinuxVersion, Init, Ready} {
			if _, ok := ph[p]; !ok {
				t.Fatalf("split %d: phase %s missing: %v", split, p, ph)
			}
		}
		if !(ph[FirstByte] < ph[LinuxVersion] && ph[LinuxVersion] < ph[Init] && ph[Init] < ph[Ready]) {
			t.Fatalf("split %d: phases out of order: %v", split, ph)
		}
		if w.Bytes() != uint64(len(console)) {
			t.Fatalf("bytes %d, want %d", w.Bytes(), len(console))
		}
	}
}

func TestWatcherMarkerWithoutNewline(t *testing.T) {
	w := New(Config{ReadyMarker: "login: ", now: fakeClock()})
	w.Write([]byte("Welcome\nhost log"))
	if _, ok := w.Phases()[Ready]; ok {
		t.Fatal("ready before the marker")
	}
	w.Write([]byte("in: "))
	if _, ok := w.Phases()[Ready]; !ok {
		t.Fatal("marker in a prompt without newline not seen")
	}
}

func TestWatcherNoMarkerNoPhase(t *testing.T) {
	w := New(Config{now: fakeClock()})
	w.Write([]byte("anything\n"))
	if _, ok := w.Phases()[Ready]; ok {
		t.Fatal("ready phase without a marker")
	}
	if _, ok := w.Phases()[LinuxVersion]; ok {
		t.Fatal("linux_version without its line")
	}
}

// TestWatcherBounds: a hostile guest cannot grow the watcher without
// bound: a huge line keeps only its start (still classified), and splats
// beyond maxSplats are counted, not kept.
func TestWatcherBounds(t *testing.T) {
	w := New(Config{now: fakeClock()})
	w.Write([]byte("BUG: " + strings.Repeat("x", 10*maxLine) + "\n"))
	s, ok := w.First(Bug)
	if !ok || len(s.Line) > maxLine {
		t.Fatalf("long BUG line: ok %v len %d", ok, len(s.Line))
	}
	if cap(w.line) > 2*maxLine {
		t.Fatalf("line buffer grew to %d", cap(w.line))
	}
	for range maxSplats + 10 {
		w.Write([]byte("WARNING: CPU: 0 PID: 1 at x\n"))
	}
	if len(w.Splats()) != maxSplats || w.Count(Warn) != maxSplats+10 {
		t.Fatalf("kept %d splats, counted %d warnings", len(w.Splats()), w.Count(Warn))
	}
}

// FuzzWatcher: any byte stream, cut anywhere, gives the same splats as the
// same stream written at once, and never panics.
func FuzzWatcher(f *testing.F) {
	for _, c := range classifyCases {
		f.Add([]byte(c.line+"\r\n"), uint16(3))
	}
	f.Add([]byte("[ 1.0] BUG: a\n\n\r\rKernel panic - not syncing: b"), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		whole := New(Config{ReadyMarker: "RDY"})
		whole.Write(data)
		parts := New(Config{ReadyMarker: "RDY"})
		c := int(cut)
		if c > len(data) {
			c = len(data)
		}
		parts.Write(data[:c])
		parts.Write(data[c:])
		a, b := whole.Splats(), parts.Splats()
		if len(a) != len(b) {
			t.Fatalf("whole %d splats, cut at %d: %d", len(a), c, len(b))
		}
		for i := range a {
			if a[i].Kind != b[i].Kind || a[i].Line != b[i].Line {
				t.Fatalf("splat %d: %+v vs %+v", i, a[i], b[i])
			}
		}
		_, ra := whole.Phases()[Ready]
		_, rb := parts.Phases()[Ready]
		if ra != rb {
			t.Fatalf("ready phase whole %v cut %v", ra, rb)
		}
		if ra != bytes.Contains(data, []byte("RDY")) && !longLine(data) {
			t.Fatalf("ready %v but marker present %v", ra, !ra)
		}
	})
}

// longLine says whether some line of data exceeds maxLine (its tail is not
// searched for the marker).
func longLine(data []byte) bool {
	for _, l := range bytes.Split(data, []byte("\n")) {
		if len(l) > maxLine-3 {
			return true
		}
	}
	return false
}

// BenchmarkWatcher is the watcher alone on a printk-stamped boot log,
// written a line at a time as the UART hands it over.
func BenchmarkWatcher(b *testing.B) {
	var lines [][]byte
	for i := 0; i < 1000; i++ {
		l := "[    1.234567] pci 0000:00:02.0: [1af4:1001] type 00 class 0x010000 conventional PCI endpoint\n"
		if i%50 == 17 {
			l = "[    1.234567] WARNING: CPU: 0 PID: 1 at drivers/base/core.c:123 device_add+0x1/0x2\n"
		}
		lines = append(lines, []byte(l))
	}
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		w := New(Config{ReadyMarker: "login:"})
		for _, l := range lines {
			w.Write(l)
		}
	}
}

package main

// TestGuestTable runs every entry of guest/tests.cfg (the kvm-unit-tests
// unittests.cfg shape: one VM configuration per test) under govm and checks
// the exit status, that every listed RESULT line appears (and passes when
// the entry expects success), and what the entry says about the disks after
// the run.

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
)

type cfgEntry struct {
	name string
	kv   map[string]string
}

// readTestsCfg parses guest/tests.cfg.
func readTestsCfg(t *testing.T) []cfgEntry {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	f, err := os.Open(filepath.Join(filepath.Dir(file), "..", "..", "guest", "tests.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []cfgEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			out = append(out, cfgEntry{name: line[1 : len(line)-1], kv: map[string]string{}})
		case len(out) > 0:
			k, v, _ := strings.Cut(line, "=")
			out[len(out)-1].kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("guest/tests.cfg has no entries")
	}
	return out
}

// makePatternDisk writes a disk image of size bytes in the read pattern
// (guest/lib/blkpattern.h) and returns its contents.
func makePatternDisk(t *testing.T, path string, size int64) []byte {
	t.Helper()
	if err := guestrun.WritePatternImage(path, size); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// diskSpec is one word of an entry's disks= key: SIZE:pattern[,ro][,serial=X].
func diskSpec(t *testing.T, dir string, i int, spec string) (flag string, path string, img []byte) {
	t.Helper()
	parts := strings.Split(spec, ",")
	sz, kind, _ := strings.Cut(parts[0], ":")
	size, err := parseSize(sz)
	if err != nil || kind != "pattern" {
		t.Fatalf("tests.cfg disk %q: %v", spec, err)
	}
	path = filepath.Join(dir, fmt.Sprintf("disk%d.img", i))
	img = makePatternDisk(t, path, int64(size))
	return strings.Join(append([]string{path}, parts[1:]...), ","), path, img
}

func TestGuestTable(t *testing.T) {
	needKVM(t)
	for _, e := range readTestsCfg(t) {
		t.Run(e.name, func(t *testing.T) {
			if strings.Contains(e.kv["needs"], "net") {
				t.Skip("network entries run in TestNet*, inside a network namespace")
			}
			if e.name == "console" {
				t.Skip("interactive: TestConsole feeds it input")
			}
			if e.name == "blk-bench" && testing.Short() {
				t.Skip("-short")
			}
			dir := t.TempDir()
			args := []string{"run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
				"-p", e.kv["cmdline"], "--mem", e.kv["memory"], "--cpus", e.kv["cpus"]}
			if strings.Contains(e.kv["needs"], "initrd") {
				data := make([]byte, 256<<10)
				rand.New(rand.NewSource(7)).Read(data)
				p := filepath.Join(dir, "initrd")
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--initrd", p)
			}
			var paths []string
			var imgs [][]byte
			for i, spec := range strings.Fields(e.kv["disks"]) {
				flag, p, img := diskSpec(t, dir, i, spec)
				args = append(args, "--disk", flag)
				paths, imgs = append(paths, p), append(imgs, img)
			}
			timeout := 60 * time.Second
			if s, err := strconv.Atoi(e.kv["timeout"]); err == nil {
				timeout = time.Duration(s) * time.Second * 2
			}
			o := govm(t, timeout, args...)
			want, _ := strconv.Atoi(e.kv["expected_exit"])
			if o.ExitCode != want {
				t.Fatalf("exit status %d, want %d\nserial:\n%s\nstderr:\n%s", o.ExitCode, want, o.Serial, o.Stderr)
			}
			for _, r := range strings.Fields(e.kv["results"]) {
				res, ok := o.Results[r]
				if !ok {
					t.Fatalf("no RESULT %s\nserial:\n%s\nstderr:\n%s", r, o.Serial, o.Stderr)
				}
				if want == 1 && !res.Pass {
					t.Fatalf("RESULT %s failed: %v\nserial:\n%s", r, res.KV, o.Serial)
				}
				checkCounters(t, res)
			}
			checkDisksAfter(t, e.kv["disk_after"], paths, imgs)
		})
	}
}

// checkCounters asserts what the guest-side virtio counters say about
// govm's interrupt discipline: never more used-buffer interrupts than
// completions (one per batch at most), and no interrupt that found the ISR
// empty (a spurious one: raised without a reason, or twice for one reason).
func checkCounters(t *testing.T, r guestrun.Result) {
	t.Helper()
	irqs, err1 := r.Int("interrupts")
	done, err2 := r.Int("completions")
	if err1 != nil || err2 != nil {
		return // not a virtio RESULT line
	}
	if strings.HasPrefix(r.Name, "blk-") && irqs > done {
		t.Errorf("RESULT %s: %d interrupts for %d completions", r.Name, irqs, done)
	}
	if sp, err := r.Int("spurious"); err == nil && sp != 0 {
		t.Errorf("RESULT %s: %d spurious interrupts (ISR read as 0)", r.Name, sp)
	}
}

// checkDisksAfter applies an entry's disk_after= key: "unchanged" (every
// disk byte-identical to what was written), or "write D START COUNT" (disk
// D's sectors START..START+COUNT hold the write pattern, all else intact).
func checkDisksAfter(t *testing.T, spec string, paths []string, imgs [][]byte) {
	t.Helper()
	f := strings.Fields(spec)
	if len(f) == 0 {
		return
	}
	want := imgs
	if f[0] == "write" {
		if len(f) != 4 {
			t.Fatalf("disk_after %q", spec)
		}
		d, _ := strconv.Atoi(f[1])
		start, _ := strconv.ParseUint(f[2], 10, 64)
		count, _ := strconv.ParseUint(f[3], 10, 64)
		want = append([][]byte(nil), imgs...)
		w := append([]byte(nil), imgs[d]...)
		for s := start; s < start+count; s++ {
			guestrun.PatternSector(w[s*512:], s, guestrun.PatternWrite)
		}
		want[d] = w
	} else if f[0] != "unchanged" {
		t.Fatalf("disk_after %q: unknown", spec)
	}
	for i, p := range paths {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want[i]) {
			t.Fatalf("disk %d: size %d, want %d", i, len(got), len(want[i]))
		}
		for s := 0; s < len(got); s += 512 {
			if string(got[s:s+512]) != string(want[i][s:s+512]) {
				t.Fatalf("disk %d: sector %d differs from what %q expects", i, s/512, spec)
			}
		}
	}
}

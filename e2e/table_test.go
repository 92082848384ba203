package e2e

// TestGuestTable boots the entries of guest/tests.cfg (the kvm-unit-tests
// unittests.cfg shape: one VM configuration per test) that its groups select
// under govm, and checks the exit status, that every listed RESULT line
// appears (and passes when the entry expects success), that nothing skips
// unless the entry's may_skip allows it, and what the entry says about the
// disks after the run.
//
// GOVM_TEST_GROUPS="blk hostile" (spaces or commas) boots only the entries
// in those groups; by default every entry outside group "nodefault", and
// under -short not group "bench" either.

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/internal/guestrun"
	"github.com/govm/govm/internal/size"
)

// tableNeeds says, for each needs= word, whether TestGuestTable provides
// it, and if not, which test does.
var tableNeeds = map[string]string{
	"initrd": "",
	"disk":   "",
	"net":    "TestNet* run it inside a network namespace",
	"input":  "TestConsole feeds the console",
}

// selectedEntries reads guest/tests.cfg and applies GOVM_TEST_GROUPS.
func selectedEntries(t *testing.T) []guestrun.TableEntry {
	t.Helper()
	all, err := guestrun.ReadTable(repoPath("guest", "tests.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	groups := strings.FieldsFunc(os.Getenv("GOVM_TEST_GROUPS"), func(r rune) bool { return r == ',' || r == ' ' })
	sel, err := guestrun.SelectGroups(all, groups)
	if err != nil {
		t.Fatalf("GOVM_TEST_GROUPS=%q: %v", os.Getenv("GOVM_TEST_GROUPS"), err)
	}
	if testing.Short() && len(groups) == 0 {
		sel = slices.DeleteFunc(sel, func(e guestrun.TableEntry) bool { return e.InGroup("bench") })
	}
	if len(sel) == 0 {
		t.Fatalf("GOVM_TEST_GROUPS=%q selects no entry", os.Getenv("GOVM_TEST_GROUPS"))
	}
	return sel
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
	size, err := size.Parse(sz)
	if err != nil || kind != "pattern" {
		t.Fatalf("tests.cfg disk %q: %v", spec, err)
	}
	path = filepath.Join(dir, fmt.Sprintf("disk%d.img", i))
	img = makePatternDisk(t, path, int64(size))
	return strings.Join(append([]string{path}, parts[1:]...), ","), path, img
}

func TestGuestTable(t *testing.T) {
	needKVM(t)
	for _, e := range selectedEntries(t) {
		t.Run(e.Name, func(t *testing.T) {
			for _, n := range strings.Fields(e.KV["needs"]) {
				elsewhere, known := tableNeeds[n]
				if !known {
					t.Fatalf("tests.cfg [%s]: unknown needs %q", e.Name, n)
				}
				if elsewhere != "" {
					t.Skipf("needs = %s: %s", n, elsewhere)
				}
			}
			dir := t.TempDir()
			args := []string{"run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
				"-p", e.KV["cmdline"], "--mem", e.KV["memory"], "--cpus", e.KV["cpus"]}
			if strings.Contains(e.KV["needs"], "initrd") {
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
			for i, spec := range strings.Fields(e.KV["disks"]) {
				flag, p, img := diskSpec(t, dir, i, spec)
				args = append(args, "--disk", flag)
				paths, imgs = append(paths, p), append(imgs, img)
			}
			timeout := 60 * time.Second
			if s, err := strconv.Atoi(e.KV["timeout"]); err == nil {
				timeout = time.Duration(s) * time.Second * 2
			}
			o := govm(t, timeout, args...)
			want, err := strconv.Atoi(e.KV["expected_exit"])
			if err != nil {
				t.Fatalf("tests.cfg [%s]: expected_exit %q", e.Name, e.KV["expected_exit"])
			}
			if o.ExitCode != want {
				t.Fatalf("exit status %d, want %d\nserial:\n%s\nstderr:\n%s", o.ExitCode, want, o.Serial, o.Stderr)
			}
			checkVerdicts(t, e, o, want == 1)
			if g := " " + e.KV["groups"] + " "; want == 1 && (strings.Contains(g, " blk ") || strings.Contains(g, " net ")) {
				noWatchdogReports(t, o.Stderr)
			}
			checkDisksAfter(t, e.KV["disk_after"], paths, imgs)
		})
	}
}

// checkVerdicts checks the RESULT lines against the entry: each name in
// results= is there, a skip only where may_skip= allows it (with its reason
// logged), and, when the entry expects success (pass), a clean report: no
// failure, no malformed line, a SUMMARY that agrees with the lines.
func checkVerdicts(t *testing.T, e guestrun.TableEntry, o *guestrun.Output, pass bool) {
	t.Helper()
	for _, r := range e.Results {
		res, ok := o.Results[r]
		switch {
		case !ok:
			t.Fatalf("no RESULT %s\nserial:\n%s\nstderr:\n%s", r, o.Serial, o.Stderr)
		case res.Skip && slices.Contains(e.MaySkip, r):
			t.Logf("RESULT %s skipped (reason=%s), as tests.cfg may_skip allows", r, res.KV["reason"])
		case pass && !res.Pass && !res.Skip:
			t.Errorf("RESULT %s failed: %v", r, res.KV)
		}
		checkCounters(t, res)
	}
	if bad := o.UnexpectedSkips(e.MaySkip...); len(bad) > 0 {
		t.Errorf("unexpected skip: %s (tests.cfg [%s] may_skip = %q)", strings.Join(bad, ", "), e.Name, e.KV["may_skip"])
	}
	if len(o.Malformed) > 0 {
		t.Errorf("malformed lines: %+v", o.Malformed)
	}
	if pass && !t.Failed() {
		// Also catches failures outside results= and a SUMMARY that lies.
		if err := o.CheckSkips(e.MaySkip...); err != nil {
			t.Errorf("report: %v", err)
		}
	}
	if t.Failed() {
		t.Fatalf("serial:\n%s\nstderr:\n%s", o.Serial, o.Stderr)
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

package main

// L2: Debian's stock kernel under govm reaches its "Memory:" line. On an
// emulation-only host everything the kernel does is emulated (~1 M
// instructions/s), so the budget is minutes, not seconds.

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/cpu"
	"github.com/govm/govm/internal/guestrun"
)

// debianKernel returns the newest installed /boot/vmlinuz-*.
func debianKernel(t *testing.T) string {
	t.Helper()
	ks, _ := filepath.Glob("/boot/vmlinuz-*")
	if len(ks) == 0 {
		t.Fatal("no /boot/vmlinuz-*: install linux-image-amd64 (.ci/run does)")
	}
	sort.Strings(ks)
	return ks[len(ks)-1]
}

var e820Line = regexp.MustCompile(`BIOS-e820: \[mem 0x([0-9a-f]+)-0x([0-9a-f]+)\] (\w+)`)

// TestLinuxBoot boots Debian's kernel once and checks, on one console log:
// it reaches its "Memory:" line within 240 s; the command line and e820 map
// it printed are the ones govm passed; and how the VM ended. On an
// emulation-only host the kernel goes on past "Memory:" (govm's parameters
// keep it off XRSTOR, and govm carries out its int3) until it executes an
// instruction KVM's emulator lacks and no parameter avoids (cmpxchg16b in
// SLUB): govm must end with status 1 and one line naming it, with RIP and
// instruction bytes. With VT-x/AMD-V the same
// boot (no root device) panics and reboots (panic=1, reboot=k): status 0.
func TestLinuxBoot(t *testing.T) {
	needKVM(t)
	if testing.Short() {
		t.Skip("-short: the L2 boot takes minutes on emulation-only hosts")
	}
	kernel := debianKernel(t)
	const mem = 512 << 20
	params := "loglevel=8 l2test=govm"
	start := time.Now()
	var memoryAt time.Duration
	o, err := guestrun.RunUntil(context.Background(), 420*time.Second, func(s string) bool {
		if memoryAt == 0 && strings.Contains(s, "Memory: ") {
			memoryAt = time.Since(start)
		}
		return false // run to the end: how the VM ends is checked too
	}, govmBin, "run", "--kernel", kernel, "-m", "512M", "-p", params)
	if err != nil {
		t.Fatal(err)
	}
	if memoryAt == 0 || memoryAt > 240*time.Second {
		t.Fatalf("no \"Memory:\" line within 240 s (seen after %v; timed out %v, exit %d)\nstderr:\n%s\nserial tail:\n%s",
			memoryAt, o.TimedOut, o.ExitCode, o.Stderr, tail(o.Serial, 3000))
	}
	t.Logf("Debian kernel %s reached \"Memory:\" after %v", filepath.Base(kernel), memoryAt.Round(time.Millisecond))

	// The command line the kernel printed is the one govm passed: its
	// defaults, what an emulation-only host needs, the user's.
	want := defaultParams + " " + params
	if hostEmulationOnly() {
		want = defaultParams + " " + cpu.EmulatorParams + " " + params
	}
	if !strings.Contains(o.Serial, "Command line: "+want) {
		t.Errorf("kernel did not print \"Command line: %s\"", want)
	}
	// The e820 map the kernel printed is the one govm built for 512 MiB.
	var got []string
	for _, m := range e820Line.FindAllStringSubmatch(o.Serial, -1) {
		start, _ := strconv.ParseUint(m[1], 16, 64)
		end, _ := strconv.ParseUint(m[2], 16, 64)
		got = append(got, fmt.Sprintf("%#x-%#x %s", start, end+1, m[3]))
	}
	wantMap := []string{
		"0x0-0x9fc00 usable",
		"0x9fc00-0xa0000 reserved",
		"0xf0000-0x100000 reserved",
		fmt.Sprintf("0x100000-%#x usable", mem),
	}
	if strings.Join(got, "; ") != strings.Join(wantMap, "; ") {
		t.Errorf("kernel e820 map:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(wantMap, "\n  "))
	}

	// How it ended.
	if o.TimedOut {
		t.Fatalf("govm still running after %v\nstderr:\n%s\nserial tail:\n%s", o.Elapsed, o.Stderr, tail(o.Serial, 2000))
	}
	if !hostEmulationOnly() {
		if o.ExitCode != 0 {
			t.Fatalf("exit %d, want 0 (panic, reboot)\n%s", o.ExitCode, o.Stderr)
		}
		return
	}
	if o.ExitCode != 1 || !unemulatedLine.MatchString(o.Stderr) {
		t.Fatalf("exit %d; stderr does not name the unemulated instruction:\n%s", o.ExitCode, o.Stderr)
	}
	t.Logf("after %v: %s", o.Elapsed.Round(time.Millisecond), unemulatedLine.FindString(o.Stderr))
}

var unemulatedLine = regexp.MustCompile(`KVM_EXIT_INTERNAL_ERROR on vCPU 0: suberror 1, rip 0x[0-9a-f]+, bytes [0-9a-f ]+: the guest executed (xrstor|xsave|cmpxchg16b|int3|xsaveopt|xrstors|xsaves)`)

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

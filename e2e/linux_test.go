package e2e

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

	"github.com/govm/govm/arch/x86/cpu"
	"github.com/govm/govm/internal/guestrun"
	"github.com/govm/govm/vmm"
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
// it printed are the ones govm passed; and, with VT-x/AMD-V, how the VM
// ended: the boot (no root device) panics and reboots (panic=1, reboot=k),
// status 0. On an emulation-only host the test stops at "Memory:": the
// kernel goes on for minutes (govm's parameters keep it off XRSTOR and
// govm carries out its int3), soft lockups and all, until an instruction
// the emulator lacks ends it (LDMXCSR, seen after 335 s here); govm's
// naming of such an instruction is TestExitStatus's KVM internal error
// case.
func TestLinuxBoot(t *testing.T) {
	needKVM(t)
	if testing.Short() {
		t.Skip("-short: the L2 boot takes minutes on emulation-only hosts")
	}
	kernel := debianKernel(t)
	const mem = 512 << 20
	params := "loglevel=8 l2test=govm"
	emu := hostEmulationOnly()
	start := time.Now()
	var memoryAt time.Duration
	o, err := guestrun.RunUntil(context.Background(), 420*time.Second, func(s string) bool {
		if memoryAt == 0 && strings.Contains(s, "Memory: ") {
			memoryAt = time.Since(start)
		}
		return emu && memoryAt != 0
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
	want := vmm.KernelParams + " " + params
	if hostEmulationOnly() {
		want = vmm.KernelParams + " " + cpu.EmulatorParams + " " + params
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

	// How it ended (with VT-x/AMD-V: it ran to its end).
	if emu {
		return
	}
	if o.TimedOut || o.ExitCode != 0 {
		t.Fatalf("exit %d (timed out %v), want 0 (panic, reboot)\n%s\nserial tail:\n%s", o.ExitCode, o.TimedOut, o.Stderr, tail(o.Serial, 2000))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

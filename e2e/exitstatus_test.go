package e2e

// Exit statuses: each row of docs/usage.md's "Exit status" table, caused
// for real.

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/arch/x86/cpu"
)

// exitCase runs govm and checks its status and the last line it printed.
type exitCase struct {
	name   string
	row    string   // the first cell of the docs/usage.md row it shows
	limit  string   // a ulimit option and value to run govm under ("-v 1048576"), or ""
	args   []string // govm's arguments
	status int
	last   string // stderr's last line, exactly (or a regexp when re)
	re     bool
	alone  bool // the only line on stderr: govm ended before booting
	emu    bool // needs an emulation-only host
}

// runGovm runs govm with args, under `ulimit limit` when limit is set.
func runGovm(t *testing.T, limit string, args ...string) *procOut {
	t.Helper()
	argv := append([]string{govmBin}, args...)
	if limit != "" {
		argv = append([]string{"sh", "-c", "ulimit " + limit + ` && exec "$0" "$@"`}, argv...)
	}
	o, err := runEnv(nil, 60*time.Second, argv...)
	if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return o
}

func TestExitStatus(t *testing.T) {
	needKVM(t)
	k := testKernel
	run := func(args ...string) []string {
		return append([]string{"run", "--kernel", k, "--no-default-params"}, args...)
	}
	cases := []exitCase{
		{name: "guest reset", row: "0", args: run("-p", "test=boot"),
			status: 0, last: "govm: guest reset via i8042"},
		// Linux without ACPI powers off by halting with interrupts off,
		// which KVM keeps inside KVM_RUN: govm must notice by itself.
		{name: "guest halted with interrupts off", row: "0", args: run("-p", "test=halt"),
			status: 0, last: "govm: the guest halted with interrupts off on every vCPU (Linux's poweroff or halt without ACPI)"},
		{name: "debug-exit 7", row: `(v<<1)\|1`, args: run("--debug-exit", "-p", "test=boot exit=7"),
			status: 15, last: "govm: guest wrote debug-exit port, status 15"},
		// MAP_NORESERVE commits nothing, but the address space limit
		// still counts the mapping; 1 GiB is enough for Go itself.
		{name: "host: guest RAM beyond ulimit -v", row: "1", limit: "-v 1048576", args: run("-m", "3G"),
			status: 1, alone: true,
			last: "govm: vmm: mmap 3072 MiB of guest RAM: cannot allocate memory (is the address space limited? see ulimit -v; or use a smaller --mem)"},
		{name: "guest: KVM internal error", row: "1", args: run("-p", "test=fault fault=cx16"), emu: true,
			status: 1, re: true,
			last: `^govm: KVM_EXIT_INTERNAL_ERROR on vCPU 0: suberror 1, rip 0x[0-9a-f]+, bytes f0 48 0f c7 [0-9a-f ]+: the guest executed cmpxchg16b, `},
		{name: "guest: kernel panic line", row: "4", args: run("-p", "test=panic"),
			status: 4, last: `govm: guest kernel panic: "Kernel panic - not syncing: govm smoke test"`},
		{name: "guest: --fail-on splat", row: "6", args: run("--debug-exit", "--fail-on", "warn", "-p", "test=splat splat.kinds=warn"),
			status: 6, last: `govm: guest kernel warn splat (--fail-on): "WARNING: CPU: 0 PID: 1 at kernel/smoke.c:42 smoke_init+0x10/0x20"`},
		{name: "timeout", row: "124", args: run("--timeout", "2s", "-p", "test=console"),
			status: 124, last: "govm: timeout: the guest was still running after 2s; stopped it"},
		{name: "--exec: the command's status", row: "v (--exec)", args: run("-i", k, "-p", "test=exec", "--exec", "exit 5"),
			status: 5, last: "govm: guest wrote debug-exit port, status 5"},
		{name: "bad input: --cpus out of range", row: "2", args: run("--cpus", "255"),
			status: 2, alone: true, last: "govm: --cpus 255: must be between 1 and 254"},
		{name: "bad input: --cpus not a number", row: "2", args: run("--cpus", "two"),
			status: 2, alone: true, last: `govm: invalid argument "two" for "-c, --cpus" flag: strconv.ParseInt: parsing "two": invalid syntax`},
		{name: "bad input: unknown flag", row: "2", args: run("--bogus"),
			status: 2, alone: true, last: "govm: unknown flag: --bogus"},
		{name: "bad input: unknown command", row: "2", args: []string{"bogus"},
			status: 2, alone: true, last: `govm: unknown command "bogus" for "govm"`},
		{name: "bad input: --mem too small", row: "2", args: run("-m", "8M"),
			status: 2, alone: true, last: "govm: vmm: bad memory size: 8 MiB is too small; use --mem 16M or more"},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.row] = true
		t.Run(c.name, func(t *testing.T) {
			if c.emu && !hostEmulationOnly() {
				t.Skip("the instruction only fails in KVM's emulator; this host has VT-x/AMD-V")
			}
			o := runGovm(t, c.limit, c.args...)
			lines := strings.Split(strings.TrimRight(o.stderr, "\n"), "\n")
			last := lines[len(lines)-1]
			ok := last == c.last
			if c.re {
				ok = regexp.MustCompile(c.last).MatchString(last)
			}
			if o.ExitCode != c.status || !ok || (c.alone && len(lines) != 1) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and the last line %q%s", o.ExitCode, o.stderr, c.status, c.last,
					map[bool]string{true: " alone", false: ""}[c.alone])
			}
		})
	}
	// Every documented status has a case above.
	for _, row := range usageExitRows(t) {
		if !covered[row] {
			t.Errorf("docs/usage.md documents exit status %s; no case here shows it", row)
		}
	}
}

// usageExitRows returns the first cell of each row of docs/usage.md's
// "Exit status" table.
func usageExitRows(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(repoPath("docs", "usage.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []string
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := s.Text()
		switch {
		case strings.HasPrefix(l, "#"):
			in = l == "### Exit status"
		case in && strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| status") && !strings.HasPrefix(l, "| ---"):
			cell, _, _ := strings.Cut(strings.TrimPrefix(l, "| "), " | ")
			rows = append(rows, cell)
		}
	}
	if len(rows) == 0 {
		t.Fatal(`docs/usage.md has no "### Exit status" table`)
	}
	return rows
}

// TestExitKVMIoctlFails: a KVM ioctl that fails is a host failure: status
// 1 and one line that names the ioctl once. KVM_CREATE_VM returns a new
// fd, so an fd limit just above what govm holds when it asks makes it fail
// with EMFILE. How many fds the Go runtime and the environment hold before
// that differs between hosts, so the limit is raised from 3 until govm gets
// past opening /dev/kvm. No API socket: its fds (the socket, its lock, its
// directory) would fail first at some limits, with a warning line.
func TestExitKVMIoctlFails(t *testing.T) {
	needKVM(t)
	for n := 3; n <= 64; n++ {
		o := runGovm(t, "-n "+strconv.Itoa(n), "run", "--kernel", testKernel, "--no-default-params", "-p", "test=boot", "--api-socket", "none")
		if strings.Contains(o.stderr, "booting") {
			t.Fatalf("ulimit -n %d: govm booted without KVM_CREATE_VM failing first:\n%s", n, o.stderr)
		}
		if !strings.Contains(o.stderr, "KVM_CREATE_VM") {
			continue // failed earlier: the runtime, or opening /dev/kvm
		}
		if want := "govm: KVM_CREATE_VM: too many open files\n"; o.stderr != want || o.ExitCode != 1 {
			t.Fatalf("ulimit -n %d: exit %d, stderr %q; want exit 1 and %q", n, o.ExitCode, o.stderr, want)
		}
		return
	}
	t.Fatal("no fd limit up to 64 made KVM_CREATE_VM fail")
}

// TestHostSaysItOnce: govm host prints why guest code is emulated once,
// in cpu.EmulationOnly's words, not wrapped in the same words again.
func TestHostSaysItOnce(t *testing.T) {
	needKVM(t)
	o := runGovm(t, "", "host")
	if o.ExitCode != 0 {
		t.Fatalf("govm host: exit %d\n%s", o.ExitCode, o.stderr)
	}
	if !hostEmulationOnly() {
		if !strings.Contains(o.stdout, "emulation-only: no") {
			t.Fatalf("govm host on a host with VT-x/AMD-V:\n%s", o.stdout)
		}
		return
	}
	_, why := cpu.EmulationOnly()
	if want := "emulation-only: yes: " + why + "\n"; !strings.HasSuffix(o.stdout, want) || strings.Count(o.stdout, "instruction emulator") != 1 {
		t.Fatalf("govm host says\n%s\nwant its last line %q and the emulator named once", o.stdout, want)
	}
}

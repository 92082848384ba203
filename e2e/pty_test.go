package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair through /dev/ptmx (pty(7)): unlock
// the slave (TIOCSPTLCK), ask its number (TIOCGPTN), open /dev/pts/N.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: /dev/ptmx: %v", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("TIOCSPTLCK: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("TIOCGPTN: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

// runOnPTY runs govm with the given stdin, and stdout and stderr on the
// pty's slave, and returns what the terminal received. It closes slave and
// stdin (the master sees the end only when no slave descriptor is open).
func runOnPTY(t *testing.T, master, slave, stdin *os.File, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, govmBin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Ends with EIO once no process has the slave open.
		_, _ = io.Copy(&out, master)
	}()
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	slave.Close()
	if stdin != nil {
		stdin.Close()
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("pty output did not end")
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// staircase returns the first line that ended in a bare "\n": on the
// terminal the next line would start where this one ended.
func staircase(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' && (i == 0 || s[i-1] != '\r') {
			start := strings.LastIndexByte(s[:i], '\n') + 1
			return s[start:i], true
		}
	}
	return "", false
}

// TestConsolePTY: with the console in a terminal (stdin raw for keys), the
// guest's bare "\n" and govm's own messages still start at the left
// margin, and the terminal is restored afterwards.
func TestConsolePTY(t *testing.T) {
	needKVM(t)
	master, slave := openPTY(t)
	defer master.Close()
	before, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	// stdin is the terminal too (a second descriptor of the slave), so
	// govm puts it in raw mode.
	in, err := os.OpenFile(slave.Name(), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := slave.Name()
	out, status := runOnPTY(t, master, slave, in, smokeArgs("test=mptable")...)
	if status != 1 || !strings.Contains(out, "RESULT mptable pass") || !strings.Contains(out, "govm: booting") {
		t.Fatalf("status %d, terminal:\n%q", status, out)
	}
	if line, bad := staircase(out); bad {
		t.Fatalf("line %q ends in a bare \\n (staircase); terminal:\n%q", line, out)
	}
	again, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	after, err := unix.IoctlGetTermios(int(again.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if *after != *before {
		t.Fatalf("terminal not restored:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestMessagesOnRawTTY: when stdout/stderr is a terminal someone else put
// in raw mode (no output post-processing), govm writes its own messages
// with "\r\n".
func TestMessagesOnRawTTY(t *testing.T) {
	needKVM(t)
	master, slave := openPTY(t)
	defer master.Close()
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	out, status := runOnPTY(t, master, slave, nil, smokeArgs("test=mptable")...)
	if status != 1 {
		t.Fatalf("status %d\n%q", status, out)
	}
	var msgs []string
	for _, l := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(l, "govm: ") {
			msgs = append(msgs, l)
		}
	}
	if len(msgs) < 2 {
		t.Fatalf("govm's messages missing:\n%q", out)
	}
	for _, m := range msgs {
		if !strings.HasSuffix(m, "\r\n") {
			t.Fatalf("message %q ends without \\r\\n on a raw terminal", m)
		}
	}
}

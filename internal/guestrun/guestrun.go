// Package guestrun runs a VMM (govm or QEMU) on the test kernel and parses the
// kernel's machine-readable serial output:
//
//	RESULT <name> pass|fail key=value ...
//	RESULT <name> skip reason=<why> key=value ...
//	SUMMARY pass=N fail=M skip=K
//
// It is the one place for both jobs, shared by the end-to-end tests in e2e
// and the benchmarks in bench/: Run and RunUntil for a whole run, Start and Proc
// for a benchmark that times what happens during one; Parse, ParseResult and
// Output.Check for the protocol; ReadTable and SelectGroups for guest/tests.cfg;
// WritePatternImage for the disk the blk tests read.
package guestrun

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// Output is everything a run produced.
type Output struct {
	Serial   string // the guest's console (VMM stdout)
	Stderr   string // the VMM's own messages
	Results  map[string]Result
	Order    []string // result names in the order printed
	Summary  bool     // a well-formed SUMMARY line was seen
	Passed   int      // SUMMARY's pass count
	Failed   int      // SUMMARY's fail count
	Skipped  int      // SUMMARY's skip count
	ExitCode int      // VMM exit status (-1 if killed, or still running)
	Elapsed  time.Duration
	TimedOut bool
	Stopped  bool // RunUntil's condition fired and the process was killed
	// Malformed lists lines that carried a RESULT or SUMMARY tag but broke the
	// protocol; they are in neither Results nor the SUMMARY counts. Check fails
	// while any are present.
	Malformed []BadLine

	// RESULT lines seen, counted per line (a repeated name counts each time),
	// for Check's comparison with SUMMARY.
	lines Counts
}

// Run starts argv, waits for it to exit or for timeout (then kills its whole
// process group: a QEMU that hit a KVM internal error pauses instead of
// exiting), and parses its stdout. A timeout is reported in Output.TimedOut, not
// as an error; the error is for a VMM that could not be started or reaped.
func Run(ctx context.Context, timeout time.Duration, argv ...string) (*Output, error) {
	return RunUntil(ctx, timeout, nil, argv...)
}

// RunUntil is Run that also stops the process (SIGKILL to its group) as soon as
// until returns true for the serial output so far. until is polled every 50 ms
// rather than per console write, because a Linux guest's console arrives a byte at
// a time. Output.Stopped says whether it fired. The end of ctx counts as a timeout.
func RunUntil(ctx context.Context, timeout time.Duration, until func(serial string) bool, argv ...string) (*Output, error) {
	p, err := Start(Options{}, argv...)
	if err != nil {
		return nil, err
	}
	cond := func() bool { return p.exited }
	if until != nil {
		cond = func() bool { return p.exited || until(p.out.String()) }
	}
	err = p.wait(ctx, "exit", timeout, 50*time.Millisecond, cond)
	p.mu.Lock()
	fired := err == nil && !p.exited
	p.mu.Unlock()
	if fired {
		p.Kill()
	}
	p.reap()
	o := p.Output()
	o.Stopped = fired
	o.TimedOut = err != nil && !errors.Is(err, ErrExited)
	var ee *exec.ExitError
	if p.waitErr != nil && !errors.As(p.waitErr, &ee) {
		return o, fmt.Errorf("guestrun: %s: %w", argv[0], p.waitErr)
	}
	return o, nil
}

// DebugExit decodes a VMM exit status produced by the debug-exit port (0x501):
// govm --debug-exit and QEMU's isa-debug-exit both exit with (v<<1)|1 after the
// guest writes v. ok is false for statuses the guest cannot produce that way
// (even ones, and -1 for a killed VMM).
func DebugExit(status int) (guestCode int, ok bool) {
	if status < 0 || status&1 == 0 {
		return 0, false
	}
	return status >> 1, true
}

// QEMUArgs returns the QEMU command line that boots kernel the way the test
// kernel expects (same devices and exit port as govm --debug-exit): qboot, the
// fastest firmware on our hosts, no default devices, serial on stdout. On this
// kind of host QEMU needs -cpu host,-arch-capabilities.
func QEMUArgs(kernel, cmdline string, memMiB int, extra ...string) []string {
	a := []string{"qemu-system-x86_64", "-accel", "kvm", "-cpu", "host,-arch-capabilities",
		"-m", strconv.Itoa(memMiB) + "M", "-nographic", "-nodefaults", "-no-reboot",
		"-bios", "/usr/share/qemu/qboot.rom", "-serial", "stdio", "-display", "none",
		"-device", "isa-debug-exit,iobase=0x501,iosize=2",
		"-kernel", kernel, "-append", cmdline}
	return append(a, extra...)
}

// Disk patterns shared with the test kernel (guest/lib/blkpattern.h) and
// guest/tools/mkpattern.py: 8-byte little-endian word w (0..63) of 512-byte sector
// s holds ((s << 16) | w) XOR a key.
const (
	// PatternRead is the key of the pattern the host writes and the guest reads.
	PatternRead uint64 = 0x9e3779b97f4a7c15
	// PatternWrite is the key of the pattern the guest's write tests store.
	PatternWrite uint64 = 0xdeadbeefcafef00d
	// SectorSize is the virtio-blk sector the pattern is laid out in.
	SectorSize = 512
)

// PatternSector fills buf (at least SectorSize bytes) with sector's pattern.
func PatternSector(buf []byte, sector, key uint64) {
	for w := uint64(0); w < SectorSize/8; w++ {
		binary.LittleEndian.PutUint64(buf[w*8:], (sector<<16|w)^key)
	}
}

// WritePatternImage creates (or truncates) path as a size-byte disk image holding
// the read pattern, the contents the guest's blk tests and blk-bench expect.
func WritePatternImage(path string, size int64) error {
	if size <= 0 || size%SectorSize != 0 {
		return fmt.Errorf("guestrun: pattern image size %d is not a positive multiple of %d", size, SectorSize)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("guestrun: pattern image: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var sec [SectorSize]byte
	for s := range uint64(size / SectorSize) {
		PatternSector(sec[:], s, PatternRead)
		if _, err = w.Write(sec[:]); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("guestrun: pattern image %s: %w", path, err)
	}
	return nil
}

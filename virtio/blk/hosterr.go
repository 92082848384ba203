package virtioblk

import (
	"fmt"
	"sync/atomic"

	"github.com/govm/govm/internal/ratelog"
)

// hostErrors is what the device remembers of its backend's failures. It
// lives in the Device, not in the I/O goroutine, so it outlasts a guest
// reset: a reset does not bring back data the host failed to write.
type hostErrors struct {
	// flushBroken is sticky: set by the first failed Sync, never
	// cleared. Linux reports a write-back error to fsync only once and
	// then marks the failed pages clean, so a second fsync returns 0 for
	// data that never reached the disk. Answering every later FLUSH with
	// IOERR is what QEMU's file-posix does (page_cache_inconsistent in
	// handle_aiocb_flush) for the same reason.
	flushBroken atomic.Bool
	readErrs    atomic.Uint64
	writeErrs   atomic.Uint64
	flushErrs   atomic.Uint64 // FLUSH requests answered IOERR
	logf        func(format string, args ...any)
	// lim keeps a disk that fails every request (EIO from a dying
	// disk, ENOSPC on a full file system) from flooding the log.
	lim *ratelog.Limiter
}

func (h *hostErrors) init(logf func(format string, args ...any)) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	h.logf = logf
	h.lim = ratelog.New(logf, 0, 0)
}

// ioFailed counts a failed read or write of n bytes at off and logs it
// through the limiter. The request ends IOERR; the device goes on.
func (h *hostErrors) ioFailed(write bool, off, n uint64, err error) {
	op := "read"
	if write {
		op = "write"
		h.writeErrs.Add(1)
	} else {
		h.readErrs.Add(1)
	}
	h.lim.Logf("host I/O error: %s of %d bytes at offset %#x: %v (guest gets IOERR)", op, n, off, err)
}

// flush runs sync unless an earlier flush failed, and returns whether the
// FLUSH succeeded.
func (h *hostErrors) flush(sync func() error) bool {
	if h.flushBroken.Load() {
		h.flushErrs.Add(1)
		return false
	}
	if err := sync(); err != nil {
		h.flushErrs.Add(1)
		if !h.flushBroken.Swap(true) {
			h.logf("host I/O error: flush failed: %v; data written before it may be lost, every later FLUSH fails", err)
		}
		return false
	}
	return true
}

// Stats are a disk's host-side error counters (its queue's notifications
// are in the queue's snapshot, qstats.Queue).
type Stats struct {
	ReadErrors, WriteErrors, FlushErrors uint64
	// FlushBroken is set once a flush failed: every later FLUSH fails.
	FlushBroken bool
	// LogSuppressed counts host I/O error lines left out of the log.
	LogSuppressed uint64
}

// Stats returns the counters since New. Safe at any time.
func (d *Device) Stats() Stats {
	return Stats{
		ReadErrors:    d.herr.readErrs.Load(),
		WriteErrors:   d.herr.writeErrs.Load(),
		FlushErrors:   d.herr.flushErrs.Load(),
		FlushBroken:   d.herr.flushBroken.Load(),
		LogSuppressed: d.herr.lim.Suppressed(),
	}
}

// String is one line for govm's log.
func (s Stats) String() string {
	broken := ""
	if s.FlushBroken {
		broken = " (flush broken: every FLUSH fails)"
	}
	return fmt.Sprintf("host errors: read %d, write %d, flush %d%s, log lines suppressed %d",
		s.ReadErrors, s.WriteErrors, s.FlushErrors, broken, s.LogSuppressed)
}

package virtioblk

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/govm/govm/internal/faultfs"
	"github.com/govm/govm/virtio/virtiotest"
)

// logRec collects a device's log lines.
type logRec struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRec) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logRec) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func flush(e *env) byte { return status(e.do([][]byte{header(TypeFlush, 0)}, []int{1})) }

// After one failed fsync every later FLUSH fails, even though the backend's
// next fsync would succeed (Linux reports a write-back error once), and a
// guest reset does not clear it. One log line says so; the stats show it.
func TestFlushErrorIsSticky(t *testing.T) {
	var log logRec
	e := newEnv(t, Config{Log: log.logf}, 0)
	if st := flush(e); st != StatusOK {
		t.Fatalf("healthy flush: status %d", st)
	}
	e.be.mu.Lock()
	e.be.failSyncs = 1
	e.be.mu.Unlock()
	for i := range 3 {
		if st := flush(e); st != StatusIOErr {
			t.Fatalf("flush %d after the failed fsync: status %d, want IOERR", i, st)
		}
	}
	e.dev.Reset()
	if err := e.dev.Activate(virtiotest.Activation(e.intr, 0, e.d)); err != nil {
		t.Fatal(err)
	}
	if st := flush(e); st != StatusIOErr {
		t.Fatalf("flush after a guest reset: status %d, want IOERR", st)
	}
	// Reads and writes go on.
	if st := status(e.do([][]byte{header(TypeOut, 1), make([]byte, SectorSize)}, []int{1})); st != StatusOK {
		t.Fatalf("write after the failed flush: status %d", st)
	}
	if lines := log.get(); len(lines) != 1 || !strings.Contains(lines[0], "flush failed") {
		t.Fatalf("log %q, want one flush line", lines)
	}
	s := e.dev.Stats()
	if !s.FlushBroken || s.FlushErrors != 4 || !strings.Contains(s.String(), "flush broken") {
		t.Fatalf("stats %+v (%s)", s, s)
	}
	if len(e.intr.Errors()) != 0 {
		t.Fatalf("host error reported as a guest error: %v", e.intr.Errors())
	}
}

// openFileT opens path as a File backend and closes it in cleanup.
func openFileT(t *testing.T, path string) *File {
	t.Helper()
	f, err := OpenFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// A real disk that fails: EIO from pread, pwrite and fsync of a FUSE file
// (the kernel's error path, not a mock). Each failed request is IOERR, the
// device goes on serving, the counters count, and the log is rate-limited.
func TestHostIOErrorsFromFUSE(t *testing.T) {
	fs := faultfs.MountT(t, diskSectors*SectorSize)
	var log logRec
	e := newEnvBackend(t, openFileT(t, fs.Path), Config{Log: log.logf}, 0)
	// A stopped clock: the limit must hold however slow the host is.
	now := time.Unix(1000, 0)
	e.dev.herr.lim.Now = func() time.Time { return now }
	write := func(sector uint64, v byte) byte {
		data := make([]byte, SectorSize)
		for i := range data {
			data[i] = v
		}
		return status(e.do([][]byte{header(TypeOut, sector), data}, []int{1}))
	}
	read := func(sector uint64) (byte, []byte) {
		u := e.do([][]byte{header(TypeIn, sector)}, []int{SectorSize, 1})
		return status(u), u.In[0]
	}
	if write(3, 0xaa) != StatusOK {
		t.Fatal("healthy write failed")
	}
	fs.Fail(faultfs.Read, syscall.EIO)
	fs.Fail(faultfs.Write, syscall.EIO)
	const n = 50
	for i := range n {
		if st, _ := read(3); st != StatusIOErr {
			t.Fatalf("read %d on EIO: status %d", i, st)
		}
		if st := write(4, 0xbb); st != StatusIOErr {
			t.Fatalf("write %d on EIO: status %d", i, st)
		}
	}
	fs.Fail(faultfs.Read, 0)
	fs.Fail(faultfs.Write, 0)
	// The device still works, and the failed writes left no data.
	if st, b := read(3); st != StatusOK || b[0] != 0xaa || b[SectorSize-1] != 0xaa {
		t.Fatalf("read after the faults cleared: status %d data %#x", st, b[0])
	}
	if got := fs.Bytes()[4*SectorSize]; got != 0 {
		t.Fatalf("failed write reached the disk: %#x", got)
	}
	s := e.dev.Stats()
	if s.ReadErrors != n || s.WriteErrors != n {
		t.Fatalf("stats %+v, want %d read and %d write errors", s, n, n)
	}
	lines := log.get()
	if len(lines) == 0 || len(lines) > 10 || uint64(len(lines))+s.LogSuppressed != 2*n {
		t.Fatalf("%d log lines, %d suppressed, for %d errors", len(lines), s.LogSuppressed, 2*n)
	}
	if !strings.Contains(lines[0], "input/output error") {
		t.Fatalf("log line %q does not name the error", lines[0])
	}
	// fsync EIO: the flush fails and stays failed after the disk heals.
	fs.Fail(faultfs.Fsync, syscall.EIO)
	if st := flush(e); st != StatusIOErr {
		t.Fatalf("flush on fsync EIO: status %d", st)
	}
	fs.Fail(faultfs.Fsync, 0)
	calls := fs.Calls(faultfs.Fsync)
	if st := flush(e); st != StatusIOErr {
		t.Fatalf("flush after a failed fsync: status %d, want IOERR (sticky)", st)
	}
	if fs.Calls(faultfs.Fsync) != calls {
		t.Fatal("a broken flush still called fsync")
	}
	if len(e.intr.Errors()) != 0 {
		t.Fatalf("host errors reported as guest errors: %v", e.intr.Errors())
	}
}

// A full disk: writes into the holes of a sparse image on a full tmpfs fail
// with ENOSPC; each is IOERR and the device goes on.
func TestHostENOSPC(t *testing.T) {
	path := faultfs.FullTmpfsT(t, diskSectors*SectorSize)
	var log logRec
	e := newEnvBackend(t, openFileT(t, path), Config{Log: log.logf}, 0)
	for i := range 3 {
		u := e.do([][]byte{header(TypeOut, uint64(i)), make([]byte, SectorSize)}, []int{1})
		if status(u) != StatusIOErr {
			t.Fatalf("write %d to a full disk: status %d", i, status(u))
		}
	}
	if u := e.do([][]byte{header(TypeIn, 0)}, []int{SectorSize, 1}); status(u) != StatusOK {
		t.Fatalf("read from a full disk: status %d", status(u))
	}
	if s := e.dev.Stats(); s.WriteErrors != 3 || s.ReadErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
	if lines := log.get(); len(lines) != 3 || !strings.Contains(lines[0], "no space left") {
		t.Fatalf("log %q", lines)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

package virtioblk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// memBackend is an in-memory disk that counts what the device does to it.
type memBackend struct {
	mu             sync.Mutex
	data           []byte
	reads, writes  int
	syncs          int
	failIO, failSz bool
	failSyncs      int // the next failSyncs Syncs fail
}

func (b *memBackend) ReadAt(p []byte, off int64) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	if b.failIO {
		return 0, errors.New("injected read error")
	}
	if off >= int64(len(b.data)) {
		return 0, io.EOF
	}
	n := copy(p, b.data[off:])
	if n < len(p) {
		return n, io.EOF // io.ReaderAt: a short count comes with an error
	}
	return n, nil
}

func (b *memBackend) WriteAt(p []byte, off int64) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	if b.failIO {
		return 0, errors.New("injected write error")
	}
	return copy(b.data[off:], p), nil
}

func (b *memBackend) Sync() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.syncs++
	if b.failSyncs > 0 {
		b.failSyncs--
		return errors.New("injected fsync error")
	}
	return nil
}

func (b *memBackend) Size() (int64, error) {
	if b.failSz {
		return 0, errors.New("injected size error")
	}
	return int64(len(b.data)), nil
}

func (b *memBackend) counts() (r, w, s int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reads, b.writes, b.syncs
}

func (b *memBackend) snapshot() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.data...)
}

const diskSectors = 64

type env struct {
	t    *testing.T
	d    *virtiotest.Driver
	dev  *Device
	intr *virtiotest.RecordingInterrupt
	be   *memBackend
}

func newEnv(t *testing.T, cfg Config, features uint64) *env {
	t.Helper()
	be := &memBackend{data: make([]byte, diskSectors*SectorSize)}
	for i := range be.data {
		be.data[i] = byte(i / SectorSize)
	}
	e := newEnvBackend(t, be, cfg, features)
	e.be = be
	return e
}

// newEnvBackend activates a device over any backend (e.be stays nil) with
// 1 MiB of fake guest RAM.
func newEnvBackend(t *testing.T, be Backend, cfg Config, features uint64) *env {
	t.Helper()
	dev, err := New(be, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, d: virtiotest.New(t, 1<<20, QueueSize), dev: dev,
		intr: virtiotest.NewRecordingInterrupt()}
	if err := dev.Activate(virtiotest.Activation(e.intr, features, e.d)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Reset)
	return e
}

func header(typ uint32, sector uint64) []byte {
	h := make([]byte, HeaderLen)
	binary.LittleEndian.PutUint32(h, typ)
	binary.LittleEndian.PutUint64(h[8:], sector)
	return h
}

// do sends one request (header + data readable; in writable buffers, the
// last of which holds the status) and waits for its completion.
func (e *env) do(out [][]byte, in []int) virtiotest.UsedElem {
	e.t.Helper()
	want := e.d.UsedIdx() + 1
	e.d.AddChain(out, in)
	e.d.KickIfNeeded()
	if !e.d.WaitUsedIdx(want, 5*time.Second) {
		e.t.Fatalf("request not completed (errors %v)", e.intr.Errors())
	}
	es := e.d.Collect()
	if len(es) != 1 {
		e.t.Fatalf("%d completions", len(es))
	}
	return es[0]
}

func status(u virtiotest.UsedElem) byte {
	last := u.In[len(u.In)-1]
	return last[len(last)-1]
}

func TestReadWriteRoundTrip(t *testing.T) {
	for _, features := range []uint64{0, virtio.Bit(virtio.FeatureRingIndirectDesc) | virtio.Bit(virtio.FeatureRingEventIdx)} {
		e := newEnv(t, Config{}, features)
		data := bytes.Repeat([]byte("govm!"), 2*SectorSize/5+1)[:2*SectorSize]
		u := e.do([][]byte{header(TypeOut, 3), data[:100], data[100:]}, []int{1})
		if status(u) != StatusOK || u.Len != 1 {
			t.Fatalf("OUT: status %d len %d", status(u), u.Len)
		}
		if !bytes.Equal(e.be.snapshot()[3*SectorSize:5*SectorSize], data) {
			t.Fatal("backend does not hold the written data")
		}
		// Read back across three writable buffers, data split oddly.
		u = e.do([][]byte{header(TypeIn, 3)}, []int{700, 2*SectorSize - 700, 1})
		got := append(append([]byte(nil), u.In[0]...), u.In[1]...)
		if status(u) != StatusOK || !bytes.Equal(got, data) || u.Len != 2*SectorSize+1 {
			t.Fatalf("IN: status %d len %d, data equal %v", status(u), u.Len, bytes.Equal(got, data))
		}
		// Status in the same buffer as the data.
		u = e.do([][]byte{header(TypeIn, 7)}, []int{SectorSize + 1})
		if status(u) != StatusOK || u.In[0][0] != 7 || u.In[0][SectorSize-1] != 7 {
			t.Fatalf("IN sector 7: status %d data %d", status(u), u.In[0][0])
		}
	}
}

func TestIndirectRequest(t *testing.T) {
	e := newEnv(t, Config{}, virtio.Bit(virtio.FeatureRingIndirectDesc))
	want := e.d.UsedIdx() + 1
	e.d.AddIndirectChain([][]byte{header(TypeIn, 5)}, []int{SectorSize, SectorSize, 1})
	e.d.Kick()
	if !e.d.WaitUsedIdx(want, 5*time.Second) {
		t.Fatal("no completion")
	}
	u := e.d.Collect()[0]
	if status(u) != StatusOK || u.In[0][0] != 5 || u.In[1][0] != 6 {
		t.Fatalf("status %d data %d %d", status(u), u.In[0][0], u.In[1][0])
	}
}

func TestRequestStatuses(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		out    [][]byte
		in     []int
		status byte
		data   []byte // expected first writable buffer, if not nil
		io     bool   // backend reads/writes allowed
	}{
		{"flush", Config{}, [][]byte{header(TypeFlush, 0)}, []int{1}, StatusOK, nil, false},
		{"get id", Config{Serial: "govm-disk-1"}, [][]byte{header(TypeGetID, 0)}, []int{IDLen, 1}, StatusOK,
			append([]byte("govm-disk-1"), make([]byte, IDLen-11)...), false},
		{"get id 20 bytes", Config{Serial: "01234567890123456789"}, [][]byte{header(TypeGetID, 0)}, []int{IDLen + 1},
			StatusOK, []byte("01234567890123456789\x00"), false},
		{"unsupported type", Config{}, [][]byte{header(99, 0)}, []int{1}, StatusUnsupp, nil, false},
		{"legacy scsi", Config{}, [][]byte{header(2, 0)}, []int{SectorSize, 1}, StatusUnsupp, nil, false},
		{"read at capacity", Config{}, [][]byte{header(TypeIn, diskSectors)}, []int{SectorSize, 1}, StatusIOErr,
			make([]byte, SectorSize), false},
		{"read straddling end", Config{}, [][]byte{header(TypeIn, diskSectors-1)}, []int{2 * SectorSize, 1}, StatusIOErr, nil, false},
		{"read sector overflow", Config{}, [][]byte{header(TypeIn, 1<<62)}, []int{SectorSize, 1}, StatusIOErr, nil, false},
		{"read max sector", Config{}, [][]byte{header(TypeIn, ^uint64(0))}, []int{SectorSize, 1}, StatusIOErr, nil, false},
		{"write past end", Config{}, [][]byte{header(TypeOut, diskSectors), make([]byte, SectorSize)}, []int{1}, StatusIOErr, nil, false},
		{"read partial sector", Config{}, [][]byte{header(TypeIn, 0)}, []int{100, 1}, StatusIOErr, nil, false},
		{"write partial sector", Config{}, [][]byte{header(TypeOut, 0), make([]byte, 100)}, []int{1}, StatusIOErr, nil, false},
		{"write read-only", Config{ReadOnly: true}, [][]byte{header(TypeOut, 1), make([]byte, SectorSize)}, []int{1}, StatusIOErr, nil, false},
		{"read read-only", Config{ReadOnly: true}, [][]byte{header(TypeIn, 2)}, []int{SectorSize, 1}, StatusOK,
			bytes.Repeat([]byte{2}, SectorSize), true},
		{"flush read-only", Config{ReadOnly: true}, [][]byte{header(TypeFlush, 0)}, []int{1}, StatusOK, nil, false},
		{"zero-length read", Config{}, [][]byte{header(TypeIn, 0)}, []int{1}, StatusOK, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.cfg, 0)
			before := e.be.snapshot()
			u := e.do(tt.out, tt.in)
			if got := status(u); got != tt.status {
				t.Fatalf("status %d, want %d", got, tt.status)
			}
			if tt.data != nil && !bytes.Equal(u.In[0], tt.data) {
				t.Fatalf("data %q, want %q", u.In[0], tt.data)
			}
			if !bytes.Equal(before, e.be.snapshot()) {
				t.Fatal("backend changed")
			}
			r, w, _ := e.be.counts()
			if w != 0 || (!tt.io && r != 0) {
				t.Fatalf("backend reads %d writes %d", r, w)
			}
		})
	}
}

func TestFlushSyncs(t *testing.T) {
	e := newEnv(t, Config{}, 0)
	e.do([][]byte{header(TypeFlush, 0)}, []int{1})
	e.do([][]byte{header(TypeFlush, 0)}, []int{1})
	if _, _, s := e.be.counts(); s != 2 {
		t.Fatalf("Sync called %d times, want 2", s)
	}
}

func TestBackendErrorIsIOErr(t *testing.T) {
	e := newEnv(t, Config{}, 0)
	e.be.mu.Lock()
	e.be.failIO = true
	e.be.mu.Unlock()
	if u := e.do([][]byte{header(TypeIn, 0)}, []int{SectorSize, 1}); status(u) != StatusIOErr {
		t.Fatalf("read with failing backend: status %d", status(u))
	}
	if u := e.do([][]byte{header(TypeOut, 0), make([]byte, SectorSize)}, []int{1}); status(u) != StatusIOErr {
		t.Fatalf("write with failing backend: status %d", status(u))
	}
	if len(e.intr.Errors()) != 0 {
		t.Fatal("host I/O error reported as device error")
	}
}

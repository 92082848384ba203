package virtio9p

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/govm/govm/internal/sharefs"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
	"github.com/hugelgupf/p9/p9"
)

// ringConn is a 9P client's connection through the device: each message
// the client writes (in as many writes as it likes) becomes a chain, the
// message readable and msize bytes writable, as Linux's trans_virtio posts
// them; the answers the device uses are what the client reads.
type ringConn struct {
	t     *testing.T
	d     *virtiotest.Driver
	msize int

	mu      sync.Mutex
	out     []byte // a message being written
	pending bytes.Buffer
	posted  uint16
	closed  chan struct{}
	wake    chan struct{}
	collect sync.WaitGroup // the goroutines collecting answers
}

// newRingConn is a client's connection over drv's ring, with 64 KiB for
// each answer.
func newRingConn(t *testing.T, drv *virtiotest.Driver) *ringConn {
	return &ringConn{t: t, d: drv, msize: 64 << 10, closed: make(chan struct{}), wake: make(chan struct{}, 1)}
}

func (c *ringConn) Write(p []byte) (int, error) {
	select {
	case <-c.closed:
		// A client's finalizer clunking a file after the test is done
		// with its ring.
		return 0, io.ErrClosedPipe
	default:
	}
	c.mu.Lock()
	c.out = append(c.out, p...)
	if len(c.out) < 4 || len(c.out) < int(binary.LittleEndian.Uint32(c.out)) {
		c.mu.Unlock()
		return len(p), nil
	}
	c.d.AddChain([][]byte{c.out}, []int{c.msize})
	c.out = nil
	c.posted++
	want := c.posted
	c.d.KickIfNeeded()
	c.mu.Unlock()
	c.collect.Add(1)
	go func() {
		defer c.collect.Done()
		if !c.d.WaitUsedIdx(want, 10*time.Second) {
			return
		}
		c.mu.Lock()
		for _, u := range c.d.Collect() {
			c.pending.Write(u.In[0][:u.Len])
		}
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}()
	return len(p), nil
}

func (c *ringConn) Read(p []byte) (int, error) {
	for {
		c.mu.Lock()
		if c.pending.Len() > 0 {
			n, _ := c.pending.Read(p)
			c.mu.Unlock()
			return n, nil
		}
		c.mu.Unlock()
		select {
		case <-c.wake:
		case <-c.closed:
			return 0, io.EOF
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (c *ringConn) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return nil
}

// start serves a fresh share (hello.txt "hi") through a device on a
// virtiotest ring and returns the device, the share's directory and the
// driver.
func start(t *testing.T, ro bool) (*Device, string, *virtiotest.Driver, *virtiotest.RecordingInterrupt) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh, err := sharefs.New(sharefs.Config{Root: dir, ReadOnly: ro})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	d, err := New("share", sh)
	if err != nil {
		t.Fatal(err)
	}
	drv := virtiotest.New(t, 4<<20, QueueSize)
	intr := virtiotest.NewRecordingInterrupt()
	if err := d.Activate(virtiotest.Activation(intr, virtio.Bit(FeatureMountTag)|1<<virtio.FeatureRingEventIdx, drv)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Reset)
	return d, dir, drv, intr
}

// TestThroughTheRing: hugelgupf/p9's 9P2000.L client, its messages carried
// by the device's ring as Linux's trans_virtio carries them, reads a host
// file and writes one the host then reads.
func TestThroughTheRing(t *testing.T) {
	d, dir, drv, _ := start(t, false)
	conn := newRingConn(t, drv)
	c, err := p9.NewClient(conn, p9.WithMessageSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r, err := c.Attach("/")
	if err != nil {
		t.Fatal(err)
	}
	_, hello, err := r.Walk([]string{"hello.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := hello.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := hello.ReadAt(buf, 0); string(buf[:n]) != "hi" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	_, dd, _ := r.Walk(nil)
	nf, _, _, err := dd.Create("out.txt", p9.ReadWrite, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nf.WriteAt([]byte("via virtio"), 0); err != nil {
		t.Fatal(err)
	}
	nf.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "via virtio" {
		t.Fatalf("host reads %q", b)
	}
	if s := d.Stats(); s.Requests < 6 || s.BytesIn == 0 || s.BytesOut == 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestConfigTag: config space is le16 tag_len, then the tag (spec of the
// 9P device; Linux's p9_virtio_probe reads both after checking the
// feature); a bad tag is refused.
func TestConfigTag(t *testing.T) {
	d, _, _, _ := start(t, true)
	buf := make([]byte, 2+len("share")+2)
	d.ReadConfig(0, buf)
	if binary.LittleEndian.Uint16(buf) != 5 || string(buf[2:7]) != "share" || buf[7] != 0 {
		t.Fatalf("config %q", buf)
	}
	if d.Features()&virtio.Bit(FeatureMountTag) == 0 || d.ConfigSize() != 7 {
		t.Fatalf("features %#x config size %d", d.Features(), d.ConfigSize())
	}
	for _, tag := range []string{"", string(make([]byte, MaxTag+1))} {
		if _, err := New(tag, nil); err == nil {
			t.Errorf("New(%d-byte tag) accepted", len(tag))
		}
	}
}

// TestBadChains: a chain without a whole 9P header, one whose size field
// claims more than it holds, and one without room for the answer are guest
// errors (NEEDS_RESET); the 9P server never sees a broken frame.
func TestBadChains(t *testing.T) {
	version := func(size uint32) []byte {
		m := binary.LittleEndian.AppendUint32(nil, size)
		m = append(m, 100, 0xff, 0xff)
		m = binary.LittleEndian.AppendUint32(m, 8192)
		return append(m, 8, 0, '9', 'P', '2', '0', '0', '0', '.', 'L')
	}
	for _, tc := range []struct {
		name string
		out  [][]byte
		in   []int
	}{
		{"short header", [][]byte{{1, 2, 3}}, []int{64}},
		{"size beyond the chain", [][]byte{version(4096)}, []int{64}},
		{"size below a header", [][]byte{version(3)}, []int{64}},
		{"no room for the answer", [][]byte{version(21)}, []int{4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, drv, intr := start(t, true)
			drv.AddChain(tc.out, tc.in)
			drv.Kick()
			if !intr.WaitFor(5*time.Second, func() bool { return len(intr.Errors()) > 0 }) {
				t.Fatal("no device error")
			}
			var ge *virtio.GuestError
			if err := intr.Errors()[0]; !errors.As(err, &ge) || !errors.Is(err, ErrBadRequest) {
				t.Fatalf("device error %v, want a GuestError wrapping ErrBadRequest", err)
			}
		})
	}
}

// TestNoXattrs: the share has no extended attributes, and the device says
// so with getxattr(2)'s errno: a Txattrwalk gets Rlerror ENODATA and a
// Txattrcreate EOPNOTSUPP (the server would say EINVAL, which overlayfs
// over a share, govm run -- CMD, takes for a failure).
func TestNoXattrs(t *testing.T) {
	_, _, drv, _ := start(t, true)
	for i, tc := range []struct {
		typ   byte
		errno uint32
	}{{30, 61}, {32, 95}} {
		m := binary.LittleEndian.AppendUint32(nil, 0)
		m = append(m, tc.typ, byte(i), 0)
		m = binary.LittleEndian.AppendUint32(m, 0) // fid
		m = binary.LittleEndian.AppendUint32(m, 1) // newfid / name's start
		m = append(m, 2, 0, 'a', 'b')
		binary.LittleEndian.PutUint32(m, uint32(len(m)))
		drv.AddChain([][]byte{m}, []int{64})
		drv.Kick()
		if !drv.WaitUsedIdx(uint16(i+1), 5*time.Second) {
			t.Fatalf("message %d not answered", tc.typ)
		}
		u := drv.Collect()[0]
		r := u.In[0][:u.Len]
		if len(r) != 11 || r[4] != 7 || r[5] != byte(i) || binary.LittleEndian.Uint32(r[7:]) != tc.errno {
			t.Fatalf("message %d answered %x, want Rlerror %d", tc.typ, r, tc.errno)
		}
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestResetReclaimsFids: a driver that resets its device while it holds
// fids (an open host file among them) leaves nothing behind on the host,
// and the next activation's session starts with an empty fid table: the
// same fid numbers attach again. Many resets cost no file descriptors and
// no goroutines.
func TestResetReclaimsFids(t *testing.T) {
	d, _, drv, intr := start(t, false)
	// The client's files are kept: a file the GC finalizes sends its own
	// Tclunk, which would race the driver's reset.
	var held []p9.File
	session := func(drv *virtiotest.Driver) {
		conn := newRingConn(t, drv)
		defer conn.collect.Wait() // all answers collected before the driver resets
		defer conn.Close()
		c, err := p9.NewClient(conn, p9.WithMessageSize(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Attach("/")
		if err != nil {
			t.Fatalf("attach: %v", err)
		}
		_, hello, err := r.Walk([]string{"hello.txt"})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := hello.Open(p9.ReadOnly); err != nil {
			t.Fatal(err)
		}
		held = append(held, r, hello)
	}
	session(drv) // the server's own descriptors and goroutines start here
	d.Reset()
	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	const rounds = 20
	for i := 0; i < rounds; i++ {
		drv.Reset()
		if err := d.Activate(virtiotest.Activation(intr, virtio.Bit(FeatureMountTag)|1<<virtio.FeatureRingEventIdx, drv)); err != nil {
			t.Fatal(err)
		}
		session(drv)
		if n := openFDs(t); n <= fds {
			t.Fatalf("round %d: %d descriptors with a file open, %d before: the test opens nothing", i, n, fds)
		}
		d.Reset()
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%d open descriptors after %d resets, %d before", n, rounds, fds)
	}
	// Goroutines end asynchronously (the clients'): allow a moment.
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > goroutines+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines+2 {
		t.Errorf("%d goroutines after %d resets, %d before", n, rounds, goroutines)
	}
	runtime.KeepAlive(held)
	if s := d.Stats(); s.FidsReclaimed != 2*(rounds+1) || s.ConnsAbandoned != 0 {
		t.Errorf("stats %+v: want %d fids reclaimed (the root's and the file's, per round) and no connection abandoned", s, 2*(rounds+1))
	}
}

// stallingAttacher is a share whose Attach waits until release is closed
// once stall is: a host filesystem that stops answering.
type stallingAttacher struct {
	p9.Attacher
	stall   atomic.Bool
	release chan struct{}
}

func (a *stallingAttacher) Attach() (p9.File, error) {
	if a.stall.Load() {
		<-a.release
	}
	return a.Attacher.Attach()
}

// TestResetCutsOffStalledRequest: a reset while the server sits on a
// request completes within resetGrace (the guest's status write, and govm's
// exit, wait on it); the connection, out of step, is left behind and
// counted, and the next activation serves over a fresh one.
func TestResetCutsOffStalledRequest(t *testing.T) {
	sh, err := sharefs.New(sharefs.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	att := &stallingAttacher{Attacher: sh, release: make(chan struct{})}
	defer close(att.release)
	d, err := New("share", att)
	if err != nil {
		t.Fatal(err)
	}
	drv := virtiotest.New(t, 4<<20, QueueSize)
	intr := virtiotest.NewRecordingInterrupt()
	act := func() {
		t.Helper()
		drv := drv
		if err := d.Activate(virtiotest.Activation(intr, virtio.Bit(FeatureMountTag)|1<<virtio.FeatureRingEventIdx, drv)); err != nil {
			t.Fatal(err)
		}
	}
	attach := func() error {
		drv := drv
		conn := newRingConn(t, drv)
		defer conn.Close()
		c, err := p9.NewClient(conn, p9.WithMessageSize(64<<10))
		if err != nil {
			return err
		}
		_, err = c.Attach("/")
		return err
	}
	act()
	att.stall.Store(true)
	go attach() // its answer never comes
	if !intr.WaitFor(5*time.Second, func() bool { return d.Stats().BytesIn > 0 }) {
		t.Fatal("Tversion was not answered")
	}
	time.Sleep(50 * time.Millisecond) // Tattach in the server's hands
	start := time.Now()
	d.Reset()
	if took := time.Since(start); took > resetGrace+time.Second {
		t.Fatalf("reset took %v with a stalled request, want about %v", took, resetGrace)
	}
	if s := d.Stats(); s.ConnsAbandoned != 1 {
		t.Fatalf("stats %+v: want the stalled connection abandoned", s)
	}
	att.stall.Store(false)
	// A fresh ring: the stalled client still watches the old one.
	drv = virtiotest.New(t, 4<<20, QueueSize)
	act()
	defer d.Reset()
	if err := attach(); err != nil {
		t.Fatalf("attach over the fresh connection: %v", err)
	}
}

// rawMsg is a 9P message of type typ and tag 1 with body parts (uint32,
// uint64, uint16 or string: 9P's s[2] string).
func rawMsg(typ byte, parts ...any) []byte {
	m := binary.LittleEndian.AppendUint32(nil, 0)
	m = append(m, typ, 1, 0)
	for _, p := range parts {
		switch v := p.(type) {
		case uint32:
			m = binary.LittleEndian.AppendUint32(m, v)
		case uint64:
			m = binary.LittleEndian.AppendUint64(m, v)
		case uint16:
			m = binary.LittleEndian.AppendUint16(m, v)
		case string:
			m = binary.LittleEndian.AppendUint16(m, uint16(len(v)))
			m = append(m, v...)
		}
	}
	binary.LittleEndian.PutUint32(m, uint32(len(m)))
	return m
}

// TestHostileMessages: what a guest's 9P client may send that Linux's never
// does keeps the device's connection in step, and a reset still reclaims
// every fid: a Tversion asking for a tiny msize (raised to 4096), a message
// beyond the msize negotiated (refused by the device, which the server
// would answer by closing the connection), a read of more than any buffer
// (the server's answer discarded), and a fid from Twalkgetattr.
func TestHostileMessages(t *testing.T) {
	d, dir, drv, _ := start(t, false)
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	fds := openFDs(t)
	sent := uint16(0)
	ask := func(m []byte) []byte {
		t.Helper()
		drv.AddChain([][]byte{m}, []int{64 << 10})
		drv.Kick()
		sent++
		if !drv.WaitUsedIdx(sent, 5*time.Second) {
			t.Fatalf("message %d not answered", m[4])
		}
		u := drv.Collect()[0]
		return u.In[0][:u.Len]
	}
	want := func(r []byte, typ byte) {
		t.Helper()
		if len(r) < 7 || r[4] != typ {
			t.Fatalf("answer %x, want type %d", r[:min(len(r), 16)], typ)
		}
	}
	wantErr := func(r []byte, errno syscall.Errno) {
		t.Helper()
		if len(r) != 11 || r[4] != 7 || binary.LittleEndian.Uint32(r[7:]) != uint32(errno) {
			t.Fatalf("answer %x, want Rlerror %d", r[:min(len(r), 16)], errno)
		}
	}
	r := ask(rawMsg(100, uint32(8), "9P2000.L"))
	want(r, 101)
	if m := binary.LittleEndian.Uint32(r[7:]); m != minMsize {
		t.Fatalf("Tversion msize 8 negotiated %d, want %d", m, minMsize)
	}
	wantErr(ask(rawMsg(100, uint32(8192), string(make([]byte, 5000)))), syscall.EMSGSIZE)
	want(ask(rawMsg(100, uint32(4<<20), "9P2000.L")), 101)                          // the server's largest
	want(ask(rawMsg(104, uint32(1), ^uint32(0), "root", "", uint32(0))), 105)       // Tattach fid 1
	want(ask(rawMsg(126, uint32(1), uint32(2), uint16(1), "big")), 127)             // Twalkgetattr 1 -> 2
	want(ask(rawMsg(12, uint32(2), uint32(0))), 13)                                 // Tlopen 2 O_RDONLY
	wantErr(ask(rawMsg(116, uint32(2), uint64(0), uint32(2<<20))), syscall.ENOBUFS) // Tread 2 MiB
	want(ask(rawMsg(116, uint32(2), uint64(0), uint32(16))), 117)                   // still in step
	if n := openFDs(t); n <= fds {
		t.Fatalf("%d descriptors with big open, %d before", n, fds)
	}
	d.Reset()
	if n := openFDs(t); n != fds {
		t.Errorf("%d descriptors after the reset, %d before", n, fds)
	}
	if s := d.Stats(); s.FidsReclaimed != 2 || s.ConnsAbandoned != 0 {
		t.Errorf("stats %+v: want the 2 fids reclaimed and no connection abandoned", s)
	}
}

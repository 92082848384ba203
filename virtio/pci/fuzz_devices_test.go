package virtiopci

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	virtioblk "github.com/govm/govm/virtio/blk"
	virtionet "github.com/govm/govm/virtio/net"
	"github.com/govm/govm/virtio/virtiotest"
)

// FuzzLegacyRegistersDevices is FuzzLegacyRegisters against the real
// virtio-blk and virtio-net devices instead of a fake: the input picks the
// device, supplies the whole guest RAM image (descriptor tables, rings,
// buffers: whatever the device goroutines find once the driver wrote
// QUEUE_PFN and DRIVER_OK) and a sequence of register accesses, kicks and
// pauses, as a hostile legacy driver could make them.
//
// Input: [0] device (bits 0-6 % 3: blk over memory, blk over a temp-file
// image via virtioblk.OpenFile, net over a socketpair; bit 7: the device
// busy-polls, PollMax), [1] op count n, then n 4-byte ops (kind, register
// offset, width selector, value; see devRig.op), then the RAM image as
// patches over zeroed RAM (see virtiotest.LoadPatches). Patches rather than a raw image:
// the net rings alone span 7 pages, and raw 28 KB inputs left the fuzzer
// minimizing (one run per byte removed) instead of fuzzing.
//
// Invariants, checked after every op unless said otherwise:
//   - nothing panics, in the transport or in a device goroutine;
//   - every register write returns within opBound; in particular a status
//     write of 0 (reset) does, and afterwards status, ISR and line are clear
//     and the transport is inactive;
//   - the line is high exactly while the ISR is non-zero (read together
//     under intMu, so a device goroutine's signal cannot fall in between);
//   - while the transport is inactive (before DRIVER_OK, after a refused
//     activation, after a reset returned) guest RAM does not change: no
//     device goroutine outlives a reset;
//   - at the end a final Reset returns within opBound, and once the
//     transport and backend are closed the goroutine and open-fd counts are
//     back to what they were before the input.
func FuzzLegacyRegistersDevices(f *testing.F) {
	for _, s := range devSeeds() {
		f.Add(s)
	}
	dir := f.TempDir() // one image path per worker process, rewritten per input
	f.Fuzz(func(t *testing.T, in []byte) {
		runDevices(t, in, dir, nil)
	})
}

// TestDevicesRigWorks shows the rig is not vacuous: on the well-formed
// seeds the real devices, driven only through the legacy registers, really
// complete the request: blk reads the sector into guest memory, net
// transmits the guest's frame to the host and receives the host's.
func TestDevicesRigWorks(t *testing.T) {
	dir := t.TempDir()
	for kind, name := range []string{"blk-mem", "blk-file", "net"} {
		t.Run(name, func(t *testing.T) {
			in := devSeed(byte(kind), false)
			runDevices(t, in, dir, func(r *devRig) bool {
				if r.used(0) != 1 {
					return false
				}
				if kind == devNet {
					return r.used(1) == 1
				}
				return true
			})
		})
	}
}

const (
	devRAM    = 32 << 10
	opBound   = 10 * time.Second
	diskBytes = 16 * virtioblk.SectorSize
)

// Devices, input[0]&0x7f % 3.
const (
	devBlkMem = iota
	devBlkFile
	devNet
)

func devKind(sel byte) int { return int(sel&0x7f) % 3 }

// Where the well-formed seeds put things (queue sizes are the devices'
// maxima, legacy has no other: blk 128, net 256).
const (
	seedPFN0     = 1 // blk request queue, net RX: pages 1-2 (blk), 1-3 (net)
	seedPFN1     = 4 // net TX: pages 4-6
	seedBlkHdr   = 0x3000
	seedBlkData  = 0x3200
	seedBlkStat  = 0x3400
	seedSector   = 3
	seedTXBuf    = 0x7000
	seedTXLen    = 70 // 10-byte vnet header + a 60-byte frame
	seedRXBuf    = 0x7400
	seedRXBufLen = 2048
)

// devRig is one input's world: the transport over a real device, its
// guest RAM, line and backend.
type devRig struct {
	t     *testing.T
	kind  int
	d     *Transport
	line  *fakeLine
	ram   []byte
	mem   *guestmem.Memory
	host  int    // net: the host end of the socketpair
	snap  []byte // RAM as of the last op the transport was inactive after
	quiet bool   // snap is valid

	closeOnce sync.Once
	closers   []func()
}

// runDevices runs one input. With until it waits (up to opBound) for it to
// hold, after the ops and before the final reset, and fails if it never does.
func runDevices(t *testing.T, in []byte, dir string, until func(*devRig) bool) {
	if len(in) < 2 {
		return
	}
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)
	sel, nops := in[0], int(in[1])
	in = in[2:]
	ops := in[:min(4*nops, len(in)/4*4)]
	r := &devRig{t: t, kind: devKind(sel), line: &fakeLine{}, ram: make([]byte, devRAM), host: -1}
	virtiotest.LoadPatches(r.ram, in[len(ops):])
	t.Cleanup(r.close)
	var err error
	if r.mem, err = guestmem.New(guestmem.Region{GPA: 0, Host: r.ram}); err != nil {
		t.Fatal(err)
	}
	var poll time.Duration
	if sel&0x80 != 0 {
		poll = time.Millisecond
	}
	var dev virtio.Device
	switch r.kind {
	case devBlkMem:
		dev, err = virtioblk.New(&memDisk{data: diskImage()}, virtioblk.Config{PollMax: poll})
	case devBlkFile:
		path := filepath.Join(dir, "disk.img")
		if err := os.WriteFile(path, diskImage(), 0o600); err != nil {
			t.Fatal(err)
		}
		var fb *virtioblk.File
		if fb, err = virtioblk.OpenFile(path, false); err != nil {
			t.Fatal(err)
		}
		r.closers = append(r.closers, func() { fb.Close() })
		dev, err = virtioblk.New(fb, virtioblk.Config{PollMax: poll})
	case devNet:
		fds, serr := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if serr != nil {
			t.Fatal(serr)
		}
		r.closers = append(r.closers, func() { unix.Close(fds[0]); unix.Close(fds[1]) })
		r.host = fds[1]
		mac := virtionet.MAC{0x52, 0x54, 0, 1, 2, 3}
		dev, err = virtionet.New(&sockBackend{fd: fds[0]}, virtionet.Config{MAC: mac, PollMax: poll})
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.d, err = New(dev, r.mem, r.line, 10, nil); err != nil {
		t.Fatal(err)
	}
	// First in, last out: the doorbells close after the device stopped.
	r.closers = append([]func(){func() { r.d.Close() }}, r.closers...)

	r.checkQuiet()
	for ; len(ops) >= 4; ops = ops[4:] {
		r.op(ops[:4])
		r.checkLine()
		r.checkQuiet()
	}
	if until != nil {
		for deadline := time.Now().Add(opBound); !until(r); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("device did not complete the seed's request: used idx %d/%d, stats %v",
					r.used(0), r.used(1), r.d.Stats())
			}
		}
		r.checkWork()
	}

	bounded(t, "final reset (Transport.Reset)", r.d.Reset)
	r.checkReset("final reset")
	r.checkQuiet()
	r.close()
	// A stopped goroutine may still be on its way out (past close(done)):
	// wait for the count, not for a margin.
	for deadline := time.Now().Add(opBound); runtime.NumGoroutine() > baseG; runtime.Gosched() {
		if time.Now().After(deadline) {
			buf := make([]byte, 64<<10)
			t.Fatalf("%d goroutines after the final reset, %d before the input:\n%s",
				runtime.NumGoroutine(), baseG, buf[:runtime.Stack(buf, true)])
		}
	}
	if n := openFDs(t); n != baseFD {
		t.Fatalf("%d fds open after the input, %d before", n, baseFD)
	}
}

// op runs one 4-byte op: [0] kind, [1] register offset, [2] width selector
// (bits 0-1: 1, 2, 4 or 3 bytes; bit 2: value | 0xFFFFFF00, for huge PFNs
// and feature bits), [3] value.
//
// Kinds (% 5): 0 register read; 1 register write; 2 pause (value&7 x 20
// us of yielding, 0: one yield) so the device goroutines get at the rings;
// 3 net: the host sends a frame of 14 + (value | (offset&7)<<8) bytes, blk:
// the VMM's Transport.Reset (teardown) instead of the driver's; 4
// KickQueue(int8(value)), the ioeventfd path.
func (r *devRig) op(op []byte) {
	width := []int{1, 2, 4, 3}[op[2]&3]
	off := uint16(op[1]) % 0x40 // header and the device configs
	v := uint32(op[3])
	if op[2]&4 != 0 {
		v |= 0xFFFFFF00
	}
	switch op[0] % 5 {
	case 0:
		var b [4]byte
		barIO{r.d}.Read(off, b[:width])
	case 1:
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], v)
		what := fmt.Sprintf("%d-byte write of %#x at %#x", width, v, off)
		reset := off == LegacyStatus && width == 1 && v&0xFF == 0
		if reset {
			what = "reset (status write of 0)"
		}
		bounded(r.t, what, func() { barIO{r.d}.Write(off, b[:width]) })
		if reset {
			r.checkReset(what)
		}
	case 2:
		// Yield rather than sleep: a sub-millisecond Sleep lasts a
		// millisecond when the process has nothing else to do.
		d := time.Duration(op[3]&7) * 20 * time.Microsecond
		for start := time.Now(); ; runtime.Gosched() {
			if time.Since(start) >= d {
				break
			}
		}
	case 3:
		if r.kind != devNet {
			bounded(r.t, "reset (Transport.Reset)", r.d.Reset)
			r.checkReset("Transport.Reset")
			return
		}
		fr := make([]byte, 14+(int(op[3])|int(op[1]&7)<<8))
		for i := range fr {
			fr[i] = byte(i)
		}
		unix.Write(r.host, fr) // a full socket drops it, as a full tap would
	case 4:
		r.d.KickQueue(int(int8(op[3])))
	}
}

// bounded runs fn and fails the test if it has not returned within
// opBound (fn's goroutine is then left behind: the input already failed).
func bounded(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	timer := time.NewTimer(opBound)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s hangs: not returned after %v", what, opBound)
	}
}

// checkLine: the line is high exactly while the ISR is non-zero. Both are
// read under intMu, where every ISR and line change happens.
func (r *devRig) checkLine() {
	r.t.Helper()
	r.d.intMu.Lock()
	isr, level := r.d.isr, r.line.level()
	r.d.intMu.Unlock()
	if level != (isr != 0) {
		r.t.Fatalf("line level %v with ISR %#x", level, isr)
	}
}

// checkReset: after a reset returned, no device goroutine is left to
// signal, so status, ISR and line stay clear and the transport is
// inactive.
func (r *devRig) checkReset(what string) {
	r.t.Helper()
	r.d.mu.Lock()
	active := r.d.active
	r.d.mu.Unlock()
	r.d.intMu.Lock()
	st, isr, level := r.d.status, r.d.isr, r.line.level()
	r.d.intMu.Unlock()
	if active || st != 0 || isr != 0 || level {
		r.t.Fatalf("after %s: active %v, status %#x, ISR %#x, line %v", what, active, st, isr, level)
	}
}

// checkQuiet: guest RAM belongs to the device only while the transport is
// active; while it is not, RAM must keep the contents it had when the
// transport was last seen inactive. Only this goroutine makes register
// accesses, so the transport cannot become active under the comparison.
func (r *devRig) checkQuiet() {
	r.t.Helper()
	r.d.mu.Lock()
	active := r.d.active
	r.d.mu.Unlock()
	switch {
	case active:
		r.quiet = false
	case !r.quiet:
		r.snap = append(r.snap[:0], r.ram...)
		r.quiet = true
	default:
		if bytes.Equal(r.ram, r.snap) {
			return
		}
		for i := range r.ram {
			if r.ram[i] != r.snap[i] {
				r.t.Fatalf("guest RAM at %#x changed from %#x to %#x while the transport was inactive",
					i, r.snap[i], r.ram[i])
			}
		}
	}
}

// used is queue q's used idx as the seeds lay the rings out.
func (r *devRig) used(q int) uint16 {
	pfn, size := uint32(seedPFN0), uint16(virtioblk.QueueSize)
	if r.kind == devNet {
		size = virtionet.QueueSize
		if q == 1 {
			pfn = seedPFN1
		}
	}
	_, _, used := virtio.LegacyRingAddrs(pfn, size)
	v, _ := r.mem.LoadUint16(used + 2)
	return v
}

// checkWork checks what a completed seed request did (after used idx
// moved, which orders the device's writes before these reads).
func (r *devRig) checkWork() {
	r.t.Helper()
	if r.kind != devNet {
		want := bytes.Repeat([]byte{sectorByte(seedSector)}, virtioblk.SectorSize)
		if got := r.ram[seedBlkData : seedBlkData+virtioblk.SectorSize]; !bytes.Equal(got, want) {
			r.t.Fatalf("blk read sector %d as % x..., want %#x", seedSector, got[:8], want[0])
		}
		if st := r.ram[seedBlkStat]; st != virtioblk.StatusOK {
			r.t.Fatalf("blk status %d", st)
		}
		return
	}
	buf := make([]byte, 4096)
	n, err := unix.Read(r.host, buf)
	if err != nil || n != seedTXLen || !bytes.Equal(buf[:n], r.ram[seedTXBuf:seedTXBuf+seedTXLen]) {
		r.t.Fatalf("host got %d bytes (%v), want the guest's %d-byte frame", n, err, seedTXLen)
	}
}

func (r *devRig) close() {
	r.closeOnce.Do(func() {
		for _, c := range r.closers {
			c()
		}
	})
}

func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

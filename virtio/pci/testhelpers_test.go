package virtiopci

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/virtio"

	"github.com/govm/govm/guestmem"
)

// fakeLine records every level it is driven to.
type fakeLine struct {
	mu     sync.Mutex
	levels []bool
	fail   bool
}

var errLine = errors.New("fake line broken")

func (l *fakeLine) Set(level bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail {
		return errLine
	}
	l.levels = append(l.levels, level)
	return nil
}

func (l *fakeLine) level() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.levels) > 0 && l.levels[len(l.levels)-1]
}

func (l *fakeLine) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.levels)
}

// fakeDevice is a virtio.Device that records its lifecycle.
type fakeDevice struct {
	typ         virtio.DeviceType
	features    uint64
	sizes       []uint16
	cfg         [8]byte
	activateErr error

	mu          sync.Mutex
	activations []virtio.Activation
	resets      int
	cfgWrites   int
}

func (f *fakeDevice) Type() virtio.DeviceType { return f.typ }
func (f *fakeDevice) Features() uint64        { return f.features }
func (f *fakeDevice) QueueMaxSizes() []uint16 { return f.sizes }

func (f *fakeDevice) ReadConfig(off uint64, data []byte) {
	for i := range data {
		if o := off + uint64(i); o < uint64(len(f.cfg)) {
			data[i] = f.cfg[o]
		}
	}
}

func (f *fakeDevice) WriteConfig(off uint64, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfgWrites++
}

func (f *fakeDevice) Activate(a virtio.Activation) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.activateErr != nil {
		return f.activateErr
	}
	f.activations = append(f.activations, a)
	return nil
}

func (f *fakeDevice) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resets++
}

// sizedDevice adds ConfigSizer.
type sizedDevice struct {
	*fakeDevice
	size int
}

func (s sizedDevice) ConfigSize() int { return s.size }

// testFeatures is what the fake offers: bits in both halves, so tests see
// that only the low 32 reach the legacy register.
const testFeatures = 1<<0 | 1<<5 | 1<<virtio.FeatureRingEventIdx | 1<<virtio.FeatureVersion1

// logRec counts log lines.
type logRec struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRec) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logRec) n() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

type rig struct {
	d    *Transport
	dev  *fakeDevice
	line *fakeLine
	log  *logRec
	mem  *guestmem.Memory
}

const testMem = 64 << 10

func newRig(t testing.TB) *rig {
	t.Helper()
	mem, err := guestmem.New(guestmem.Region{GPA: 0, Host: make([]byte, testMem)})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{
		dev:  &fakeDevice{typ: virtio.DeviceNet, features: testFeatures, sizes: []uint16{16, 16}, cfg: [8]byte{1, 2, 3, 4, 5, 6, 7, 8}},
		line: &fakeLine{},
		log:  &logRec{},
		mem:  mem,
	}
	r.d, err = New(r.dev, mem, r.line, 10, r.log.logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.d.Close() })
	return r
}

// kicked reports whether queue q's doorbell was rung, and takes the ring.
func (r *rig) kicked(q int) bool { return r.d.bells[q].Clear() }

// waitKick waits for b to be rung (by another goroutine), and takes the
// ring.
func waitKick(t *testing.T, b *virtio.Doorbell) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !b.Clear(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no kick")
		}
	}
}

func (r *rig) rd(off uint16, n int) uint32 {
	var b [4]byte
	barIO{r.d}.Read(off, b[:n])
	return binary.LittleEndian.Uint32(b[:])
}

func (r *rig) wr(off uint16, n int, v uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	barIO{r.d}.Write(off, b[:n])
}

// setupQueue selects queue q and gives it rings at pfn.
func (r *rig) setupQueue(q uint16, pfn uint32) {
	r.wr(LegacyQueueSelect, 2, uint32(q))
	r.wr(LegacyQueuePFN, 4, pfn)
}

// isrLevel returns the ISR without the read-to-clear side effect.
func (r *rig) isrLevel() uint8 {
	r.d.intMu.Lock()
	defer r.d.intMu.Unlock()
	return r.d.isr
}

// checkLine asserts the transport's invariant: the line is high exactly
// while the ISR is non-zero.
func (r *rig) checkLine(t testing.TB) {
	t.Helper()
	if isr := r.isrLevel(); r.line.level() != (isr != 0) {
		t.Fatalf("line level %v with ISR %#x", r.line.level(), isr)
	}
}

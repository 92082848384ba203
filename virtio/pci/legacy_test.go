package virtiopci

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/internal/ratelog"
	"github.com/govm/govm/virtio"

	"github.com/govm/govm/pci"
)

func cfg32(d pci.Device, off uint8) uint32 {
	var b [4]byte
	d.ConfigRead(off, b[:])
	return binary.LittleEndian.Uint32(b[:])
}

func barSize(d pci.Device) uint32 {
	d.ConfigWrite(pci.OffBAR0, []byte{0xff, 0xff, 0xff, 0xff})
	m := cfg32(d, pci.OffBAR0) &^ 3
	return m & -m
}

func TestPCIIdentity(t *testing.T) {
	tests := []struct {
		name                 string
		typ                  virtio.DeviceType
		cfgSize              int // 0: no ConfigSizer
		wantID               uint32
		wantClass, wantBAR   uint32
		wantSubsys, wantLine uint32
	}{
		{"net", virtio.DeviceNet, 0, 0x1000<<16 | PCIVendor, 0x020000, 0x100, 1<<16 | PCIVendor, 10},
		{"blk", virtio.DeviceBlk, 0, 0x1001<<16 | PCIVendor, 0x010000, 0x100, 2<<16 | PCIVendor, 10},
		{"net sized", virtio.DeviceNet, 10, 0x1000<<16 | PCIVendor, 0x020000, 0x20, 1<<16 | PCIVendor, 10},
		{"blk sized", virtio.DeviceBlk, 60, 0x1001<<16 | PCIVendor, 0x010000, 0x80, 2<<16 | PCIVendor, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd := &fakeDevice{typ: tt.typ, sizes: []uint16{128}}
			var dev virtio.Device = fd
			if tt.cfgSize != 0 {
				dev = sizedDevice{fd, tt.cfgSize}
			}
			d, err := New(dev, nil, &fakeLine{}, 10, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg32(d, pci.OffVendorID); got != tt.wantID {
				t.Errorf("ID %#x, want %#x", got, tt.wantID)
			}
			if got := cfg32(d, pci.OffRevision); got != tt.wantClass<<8 {
				t.Errorf("class/revision %#x, want %#x (revision 0)", got, tt.wantClass<<8)
			}
			if got := cfg32(d, pci.OffSubsystemVenID); got != tt.wantSubsys {
				t.Errorf("subsystem %#x, want %#x", got, tt.wantSubsys)
			}
			if got := cfg32(d, pci.OffInterruptLine) & 0xFFFF; got != 1<<8|tt.wantLine {
				t.Errorf("line/pin %#x, want pin 1 line %d", got, tt.wantLine)
			}
			if got := barSize(d); got != tt.wantBAR {
				t.Errorf("BAR0 size %#x, want %#x", got, tt.wantBAR)
			}
			if cfg32(d, pci.OffBAR0)&1 != 1 {
				t.Error("BAR0 is not an I/O BAR")
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		dev  virtio.Device
	}{
		{"unknown type", &fakeDevice{typ: 42, sizes: []uint16{16}}},
		{"queue size not power of two", &fakeDevice{typ: virtio.DeviceBlk, sizes: []uint16{24}}},
		{"queue size zero", &fakeDevice{typ: virtio.DeviceBlk, sizes: []uint16{0}}},
		{"config too big", sizedDevice{&fakeDevice{typ: virtio.DeviceBlk, sizes: []uint16{16}}, 0x100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.dev, nil, &fakeLine{}, 10, nil); !errors.Is(err, ErrUnsupportedDevice) {
				t.Fatalf("err = %v, want ErrUnsupportedDevice", err)
			}
		})
	}
}

func TestRegisterReads(t *testing.T) {
	r := newRig(t)
	r.wr(LegacyQueueSelect, 2, 1)
	r.wr(LegacyStatus, 1, StatusAcknowledge|StatusDriver)
	tests := []struct {
		name string
		off  uint16
		n    int
		want uint32
	}{
		{"host features dword, low 32 bits only", LegacyHostFeatures, 4, uint32(testFeatures & 0xFFFFFFFF)},
		{"host features high word", LegacyHostFeatures + 2, 2, uint32(testFeatures>>16) & 0xFFFF},
		{"host features low byte", LegacyHostFeatures, 1, testFeatures & 0xFF},
		{"guest features start at 0", LegacyGuestFeatures, 4, 0},
		{"queue size", LegacyQueueSize, 2, 16},
		{"queue select", LegacyQueueSelect, 2, 1},
		{"size+select dword", LegacyQueueSize, 4, 1<<16 | 16},
		{"notify reads 0", LegacyQueueNotify, 2, 0},
		{"status", LegacyStatus, 1, StatusAcknowledge | StatusDriver},
		{"ISR", LegacyISR, 1, 0},
		{"config dword", LegacyConfig, 4, 0x04030201},
		{"config word at 6", LegacyConfig + 6, 2, 0x0807},
		{"config past device size reads 0", LegacyConfig + 8, 4, 0},
		{"status+ISR+config straddle", LegacyStatus, 4, 0x0201<<16 | StatusAcknowledge | StatusDriver},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.rd(tt.off, tt.n); got != tt.want {
				t.Fatalf("read %d bytes at %#x = %#x, want %#x", tt.n, tt.off, got, tt.want)
			}
		})
	}
}

func TestFeatureNegotiation(t *testing.T) {
	tests := []struct {
		name   string
		status uint8 // written before the features
		write  uint32
		want   uint32
	}{
		{"offered subset", StatusAcknowledge | StatusDriver, 1<<5 | 1<<virtio.FeatureRingEventIdx, 1<<5 | 1<<virtio.FeatureRingEventIdx},
		{"unoffered bits dropped", StatusAcknowledge | StatusDriver, 0xFFFFFFFF, testFeatures & 0xFFFFFFFF},
		{"after FEATURES_OK ignored", StatusAcknowledge | StatusDriver | StatusFeaturesOK, 1 << 5, 0},
		{"after DRIVER_OK ignored", StatusAcknowledge | StatusDriver | StatusDriverOK, 1 << 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.wr(LegacyStatus, 1, uint32(tt.status))
			r.wr(LegacyGuestFeatures, 4, tt.write)
			if got := r.rd(LegacyGuestFeatures, 4); got != tt.want {
				t.Fatalf("guest features %#x, want %#x", got, tt.want)
			}
			late := tt.status&(StatusFeaturesOK|StatusDriverOK) != 0
			if late != (r.log.n() == 1) {
				t.Fatalf("late=%v but log lines %q", late, r.log.lines)
			}
			if r.d.Status()&StatusNeedsReset != 0 {
				t.Fatal("a late feature write must only be ignored")
			}
		})
	}
}

func TestQueueSetup(t *testing.T) {
	r := newRig(t)
	r.setupQueue(1, 3)
	if got := r.rd(LegacyQueuePFN, 4); got != 3 {
		t.Fatalf("PFN read back %#x", got)
	}
	q := r.d.queues[1]
	desc, avail, used := virtio.LegacyRingAddrs(3, 16)
	if !q.Ready || q.Size != 16 || q.DescAddr != desc || q.AvailAddr != avail || q.UsedAddr != used {
		t.Fatalf("queue 1 = %+v, want ready size 16 rings %#x %#x %#x", q, desc, avail, used)
	}
	if r.d.queues[0].Ready {
		t.Fatal("queue 0 configured by a write to queue 1")
	}
	// Past the last queue: size 0 (how drivers count queues), writes ignored.
	r.setupQueue(2, 5)
	if got := r.rd(LegacyQueueSize, 2); got != 0 {
		t.Fatalf("size of absent queue %d", got)
	}
	if got := r.rd(LegacyQueuePFN, 4); got != 0 {
		t.Fatalf("PFN of absent queue %#x", got)
	}
	// PFN 0 releases the queue.
	r.setupQueue(1, 0)
	if q.Ready || r.d.pfns[1] != 0 {
		t.Fatalf("queue 1 still ready after PFN 0: %+v", q)
	}
	// Size is read-only on the legacy transport.
	r.wr(LegacyQueueSize, 2, 4)
	r.wr(LegacyQueueSelect, 2, 0)
	if got := r.rd(LegacyQueueSize, 2); got != 16 {
		t.Fatalf("queue size changed to %d", got)
	}
	if r.d.Status()&StatusNeedsReset != 0 {
		t.Fatal("valid setup caused NEEDS_RESET")
	}
}

func TestBadPFN(t *testing.T) {
	tests := []struct {
		name string
		pfn  uint32
	}{
		{"beyond RAM", 0x100000},
		{"rings run off the end of RAM", testMem/4096 - 1},
		{"max PFN", 0xFFFFFFFF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.setupQueue(0, tt.pfn)
			if r.d.queues[0].Ready || r.rd(LegacyQueuePFN, 4) != 0 {
				t.Fatal("bad rings accepted")
			}
			if s := r.d.Status(); s&StatusNeedsReset == 0 {
				t.Fatalf("status %#x lacks NEEDS_RESET", s)
			}
			if r.isrLevel() != ISRConfig || !r.line.level() {
				t.Fatalf("ISR %#x line %v, want config interrupt", r.isrLevel(), r.line.level())
			}
			if r.log.n() != 1 {
				t.Fatalf("log lines %q, want 1", r.log.lines)
			}
			// A repeat is not logged again, and DRIVER_OK no longer activates.
			r.setupQueue(0, tt.pfn)
			r.wr(LegacyStatus, 1, StatusAcknowledge|StatusDriver|StatusDriverOK)
			if len(r.dev.activations) != 0 {
				t.Fatal("activated a device that needs reset")
			}
			if s := r.d.Status(); s&StatusNeedsReset == 0 {
				t.Fatal("driver status write cleared NEEDS_RESET")
			}
			if r.log.n() != 2 { // the bad PFN once, the refused DRIVER_OK once
				t.Fatalf("log lines %q", r.log.lines)
			}
			// Reset recovers.
			r.wr(LegacyStatus, 1, 0)
			r.setupQueue(0, 1)
			if !r.d.queues[0].Ready || r.d.Status() != 0 {
				t.Fatal("device did not recover after reset")
			}
		})
	}
}

func TestActivation(t *testing.T) {
	tests := []struct {
		name       string
		pfns       []uint32 // per queue, 0 = left unconfigured
		wantQueues int
	}{
		{"all queues", []uint32{1, 3}, 2},
		{"first only", []uint32{1, 0}, 1},
		{"gap stops the list", []uint32{0, 3}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.wr(LegacyStatus, 1, StatusAcknowledge|StatusDriver)
			r.wr(LegacyGuestFeatures, 4, 1<<virtio.FeatureRingEventIdx)
			for q, pfn := range tt.pfns {
				r.setupQueue(uint16(q), pfn)
			}
			r.wr(LegacyStatus, 1, StatusAcknowledge|StatusDriver|StatusDriverOK)
			r.wr(LegacyStatus, 1, StatusAcknowledge|StatusDriver|StatusDriverOK) // no second activation
			if len(r.dev.activations) != 1 {
				t.Fatalf("%d activations, want 1", len(r.dev.activations))
			}
			a := r.dev.activations[0]
			if len(a.Queues) != tt.wantQueues || len(a.Bells) != tt.wantQueues {
				t.Fatalf("%d queues %d bells, want %d", len(a.Queues), len(a.Bells), tt.wantQueues)
			}
			for i, q := range a.Queues {
				if q != r.d.queues[i] || !q.Ready || !q.EventIdx() {
					t.Fatalf("queue %d: %+v (want ready, event idx)", i, q)
				}
			}
			if a.Features != 1<<virtio.FeatureRingEventIdx || a.Mem != r.mem || a.Intr != virtio.Interrupt(r.d) {
				t.Fatalf("activation features %#x mem %p intr %v", a.Features, a.Mem, a.Intr)
			}
			if got := r.rd(LegacyStatus, 1); got != StatusAcknowledge|StatusDriver|StatusDriverOK {
				t.Fatalf("status %#x", got)
			}
		})
	}
}

func TestActivateRefused(t *testing.T) {
	r := newRig(t)
	r.dev.activateErr = errors.New("needs two queues")
	r.setupQueue(0, 1)
	r.wr(LegacyStatus, 1, StatusDriverOK)
	if s := r.d.Status(); s&StatusNeedsReset == 0 || r.isrLevel() != ISRConfig {
		t.Fatalf("status %#x ISR %#x, want NEEDS_RESET and config interrupt", s, r.isrLevel())
	}
	if r.d.active {
		t.Fatal("marked active after a refused activation")
	}
}

func TestNotify(t *testing.T) {
	r := newRig(t)
	r.wr(LegacyQueueNotify, 2, 1)
	r.wr(LegacyQueueNotify, 2, 1) // coalesces with the pending kick
	if !r.kicked(1) {
		t.Fatal("no kick on queue 1")
	}
	for q := range r.d.bells {
		if r.kicked(q) {
			t.Fatalf("extra kick on queue %d", q)
		}
	}
	r.wr(LegacyQueueNotify, 2, 2)
	r.wr(LegacyQueueNotify, 2, 0xFFFF)
	if r.log.n() != 1 {
		t.Fatalf("out-of-range notifies logged %q, want one line", r.log.lines)
	}
	r.wr(LegacyQueueNotify, 1, 0) // wrong width: not a notify
	if r.kicked(0) {
		t.Fatal("1-byte write kicked")
	}
}

func TestMisalignedWritesIgnored(t *testing.T) {
	r := newRig(t)
	r.wr(LegacyQueuePFN, 2, 1)
	r.wr(LegacyGuestFeatures, 1, 1<<5)
	r.wr(LegacyStatus, 2, StatusDriverOK)
	r.wr(LegacyHostFeatures, 4, 0)
	if r.d.queues[0].Ready || r.rd(LegacyGuestFeatures, 4) != 0 || r.d.Status() != 0 {
		t.Fatal("a write of the wrong width changed state")
	}
	if r.rd(LegacyHostFeatures, 4) != testFeatures&0xFFFFFFFF {
		t.Fatal("host features written")
	}
	r.wr(LegacyConfig+2, 2, 0xABCD)
	if r.dev.cfgWrites != 1 {
		t.Fatal("config write not passed to the device")
	}
}

func TestStatusReset(t *testing.T) {
	r := newRig(t)
	r.wr(LegacyGuestFeatures, 4, 1<<5)
	r.setupQueue(0, 1)
	r.setupQueue(1, 3)
	r.wr(LegacyStatus, 1, StatusAcknowledge|StatusDriver|StatusDriverOK)
	r.d.SignalUsed(0)
	r.d.KickQueue(0)
	r.wr(LegacyStatus, 1, 0)
	if r.dev.resets != 1 {
		t.Fatalf("device Reset called %d times", r.dev.resets)
	}
	for i, q := range r.d.queues {
		if q.Ready || q.DescAddr != 0 || r.d.pfns[i] != 0 {
			t.Fatalf("queue %d not cleared: %+v", i, q)
		}
	}
	if r.isrLevel() != 0 || r.line.level() || r.d.Status() != 0 || r.rd(LegacyGuestFeatures, 4) != 0 || r.rd(LegacyQueueSelect, 2) != 0 {
		t.Fatal("reset left ISR/line/status/features/select set")
	}
	if r.kicked(0) {
		t.Fatal("stale kick survived reset")
	}
	// The device can be brought up again.
	r.setupQueue(0, 1)
	r.wr(LegacyStatus, 1, StatusDriverOK)
	if len(r.dev.activations) != 2 {
		t.Fatalf("%d activations after re-init, want 2", len(r.dev.activations))
	}
}

func TestDeviceError(t *testing.T) {
	r := newRig(t)
	r.setupQueue(0, 1)
	r.wr(LegacyStatus, 1, StatusAcknowledge|StatusDriver|StatusDriverOK)
	gerr := &virtio.GuestError{Queue: 0, Err: virtio.ErrDescLoop}
	r.d.DeviceError(gerr)
	r.d.DeviceError(gerr)
	if got := r.rd(LegacyStatus, 1); got != StatusAcknowledge|StatusDriver|StatusDriverOK|StatusNeedsReset {
		t.Fatalf("status %#x", got)
	}
	if got := r.rd(LegacyISR, 1); got != ISRConfig {
		t.Fatalf("ISR %#x, want config bit", got)
	}
	if r.log.n() != 1 {
		t.Fatalf("log lines %q, want 1", r.log.lines)
	}
	r.checkLine(t)
}

// A guest looping "bad QUEUE_PFN, reset" (two port writes per guest error)
// or "bad ring, kick, reset" cannot flood the host log: lines are limited
// per device across resets, and the stats count the rest.
func TestGuestErrorLogRateLimited(t *testing.T) {
	r := newRig(t)
	// A stopped clock: the limit must hold however slow the host is.
	now := time.Unix(1000, 0)
	r.d.guestLog.Now = func() time.Time { return now }
	const loops = 1000
	for i := range loops {
		r.setupQueue(0, 0xffffffff) // rings far outside guest RAM
		if i%2 == 1 {
			r.d.DeviceError(&virtio.GuestError{Queue: 0, Err: virtio.ErrDescLoop})
		}
		if r.rd(LegacyStatus, 1)&StatusNeedsReset == 0 {
			t.Fatalf("loop %d: no NEEDS_RESET", i)
		}
		r.wr(LegacyStatus, 1, 0)
	}
	s := r.d.Stats()
	if n := r.log.n(); n > ratelog.DefaultBurst || n == 0 {
		t.Fatalf("%d log lines for %d guest errors, want 1..%d", n, loops, ratelog.DefaultBurst)
	}
	// One line per reset epoch without the limit; repeats inside an
	// epoch (the DeviceError after the bad PFN) were never logged.
	if s.GuestErrors != loops+loops/2 || s.GuestLogSuppressed != loops-uint64(r.log.n()) {
		t.Fatalf("stats: %d guest errors, %d suppressed, %d logged", s.GuestErrors, s.GuestLogSuppressed, r.log.n())
	}
	if !strings.Contains(s.String(), fmt.Sprintf("(%d log lines suppressed)", s.GuestLogSuppressed)) {
		t.Fatalf("stats line %q", s)
	}
}

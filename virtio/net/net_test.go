package virtionet

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
	"golang.org/x/sys/unix"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func TestConfigSpace(t *testing.T) {
	d, err := New(newFake(t, false), Config{MAC: testMAC})
	if err != nil {
		t.Fatal(err)
	}
	if d.Type() != virtio.DeviceNet || len(d.QueueMaxSizes()) != 2 {
		t.Errorf("type %d queues %v", d.Type(), d.QueueMaxSizes())
	}
	tests := []struct {
		off  uint64
		n    int
		want []byte
	}{
		{0, 8, []byte{0x52, 0x54, 0, 1, 2, 3, StatusLinkUp, 0}},
		{4, 4, []byte{2, 3, 1, 0}},
		{6, 2, []byte{1, 0}},
		{7, 4, []byte{0, 0, 0, 0}},
		{100, 2, []byte{0, 0}},
	}
	for _, tt := range tests {
		got := bytes.Repeat([]byte{0xee}, tt.n)
		d.ReadConfig(tt.off, got)
		if !bytes.Equal(got, tt.want) {
			t.Errorf("ReadConfig(%d, %d) = % x, want % x", tt.off, tt.n, got, tt.want)
		}
	}
	d.WriteConfig(4, []byte{0xaa, 0xbb, 0xcc, 0xdd}) // mac[4:6], then status: ignored
	got := make([]byte, 8)
	d.ReadConfig(0, got)
	if !bytes.Equal(got, []byte{0x52, 0x54, 0, 1, 0xaa, 0xbb, 1, 0}) {
		t.Errorf("after WriteConfig: % x", got)
	}
	if d.MAC().String() != "52:54:00:01:aa:bb" {
		t.Errorf("MAC %v", d.MAC())
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := New(nil, Config{MAC: testMAC}); err == nil {
		t.Errorf("nil backend accepted")
	}
	for _, mac := range []MAC{{}, {1, 2, 3, 4, 5, 6}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		if _, err := New(newFake(t, false), Config{MAC: mac}); !errors.Is(err, ErrBadMAC) {
			t.Errorf("MAC % x: %v, want ErrBadMAC", mac, err)
		}
	}
}

func TestFeaturesOffered(t *testing.T) {
	d, _ := New(newFake(t, false), Config{MAC: testMAC})
	f := d.Features()
	for _, b := range []uint{FeatureCsum, FeatureGuestCsum, FeatureMAC, FeatureStatus, FeatureMrgRxBuf,
		FeatureHostTSO4, FeatureHostTSO6, FeatureGuestTSO4, FeatureGuestTSO6,
		virtio.FeatureRingEventIdx, virtio.FeatureRingIndirectDesc, virtio.FeatureNotifyOnEmpty} {
		if f&virtio.Bit(b) == 0 {
			t.Errorf("feature %d not offered", b)
		}
	}
	if f>>32 != 0 {
		t.Errorf("features %#x beyond the legacy 32 bits", f)
	}
	// Withheld bits (govm run --net ...,mrg-rxbuf=off) are not offered;
	// the rest are.
	off := virtio.Bit(FeatureMrgRxBuf) | virtio.Bit(virtio.FeatureRingEventIdx)
	w, _ := New(newFake(t, false), Config{MAC: testMAC, Withhold: off})
	if got := w.Features(); got != f&^off {
		t.Errorf("withholding %#x: features %#x, want %#x", off, got, f&^off)
	}
}

func TestActivateConfiguresBackend(t *testing.T) {
	tests := []struct {
		feat    uint64
		hdr     int
		offload uint
	}{
		{0, 10, 0},
		{feat(FeatureMrgRxBuf), 12, 0},
		{feat(FeatureGuestCsum, FeatureGuestTSO4, FeatureGuestTSO6, FeatureHostTSO4), 10,
			unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6},
		{feat(FeatureGuestTSO4, FeatureMrgRxBuf), 12, 0}, // TSO without GUEST_CSUM
	}
	for _, tt := range tests {
		e := newEnv(t, tt.feat, false)
		if e.be.hdrSize != tt.hdr || e.be.offload != tt.offload {
			t.Errorf("features %#x: hdr %d offload %#x, want %d %#x", tt.feat, e.be.hdrSize, e.be.offload, tt.hdr, tt.offload)
		}
		e.dev.Reset()
	}
}

func TestActivateNeedsTwoQueues(t *testing.T) {
	d, _ := New(newFake(t, false), Config{MAC: testMAC})
	ds := virtiotest.NewQueues(t, 1<<20, QueueSize)
	err := d.Activate(virtiotest.Activation(virtiotest.NewRecordingInterrupt(), 0, ds...))
	if !errors.Is(err, ErrQueues) {
		t.Errorf("Activate with one queue: %v", err)
	}
}

// TestResetUnblocksAndReactivates: Reset returns promptly while RX waits
// on the backend (buffers posted) and TX waits for a kick, and the device
// works after a new activation.
func TestResetUnblocksAndReactivates(t *testing.T) {
	e := newEnv(t, 0, false)
	e.rx.AddChain(nil, []int{hdrLenBase + maxFrame})
	e.rx.KickIfNeeded()
	time.Sleep(20 * time.Millisecond)
	done := make(chan struct{})
	go func() { e.dev.Reset(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatalf("Reset did not return")
	}
	ds := virtiotest.NewQueues(t, 4<<20, QueueSize, QueueSize)
	if err := e.dev.Activate(virtiotest.Activation(e.intr, 0, ds...)); err != nil {
		t.Fatalf("re-Activate: %v", err)
	}
	ds[0].AddChain(nil, []int{hdrLenBase + maxFrame})
	ds[0].KickIfNeeded()
	in := append(hdrWith(hdrLenBase), frame(64, 1)...)
	e.be.inject(in)
	if !ds[0].WaitUsedIdx(1, 2*time.Second) {
		t.Fatalf("no delivery after re-activation")
	}
	if u := ds[0].Collect(); !bytes.Equal(u[0].In[0][:u[0].Len], in) {
		t.Errorf("frame differs after re-activation")
	}
}

// TestQueueReporter: the queues' names are the spec's (receiveq1 "rx",
// transmitq1 "tx"), and each reports its frame bytes and drop reasons.
func TestQueueReporter(t *testing.T) {
	d, err := New(newFake(t, false), Config{MAC: testMAC})
	if err != nil {
		t.Fatal(err)
	}
	if d.QueueName(RXQueue) != "rx" || d.QueueName(TXQueue) != "tx" {
		t.Fatalf("names %q %q", d.QueueName(RXQueue), d.QueueName(TXQueue))
	}
	d.stats.tx.bytes.Add(60)
	d.stats.tx.dropMalformed.Add(2)
	b, drops, ok := d.QueueTraffic(TXQueue)
	if !ok || b != 60 || drops["malformed"] != 2 || len(drops) != 3 {
		t.Fatalf("tx traffic %d %v %v", b, drops, ok)
	}
	if _, _, ok := d.QueueTraffic(2); ok {
		t.Fatal("queue 2 reports traffic")
	}
}

// TestActivateTwice: a second Activate on an active device fails with
// virtio.ErrActive before it touches the backend's settings.
func TestActivateTwice(t *testing.T) {
	e := newEnv(t, 0, false)
	size := func() int { e.be.mu.Lock(); defer e.be.mu.Unlock(); return e.be.hdrSize }
	hdr := size()
	// Not virtiotest.Activation: it would renegotiate the live queues.
	a := virtio.Activation{Mem: e.rx.Mem, Features: virtio.Bit(FeatureMrgRxBuf), Intr: virtiotest.NewRecordingInterrupt(),
		Queues: []*virtio.Queue{e.rx.Queue, e.tx.Queue}, Bells: []*virtio.Doorbell{e.rx.Bell(), e.tx.Bell()}}
	if err := e.dev.Activate(a); !errors.Is(err, virtio.ErrActive) {
		t.Fatalf("second Activate: %v, want ErrActive", err)
	}
	if size() != hdr {
		t.Fatalf("the backend's header size changed from %d to %d", hdr, size())
	}
}

package virtionet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// sockBackend is a Backend over one end of an AF_UNIX SOCK_SEQPACKET
// socketpair, standing in for the tap: message boundaries are kept like a
// tap's frames, a read reports the frame's full length like tun (MSG_TRUNC),
// and the fd is non-blocking. It opens nothing else, so a fuzz input owns
// exactly the two fds of its pair and closes both.
type sockBackend struct {
	fd int
}

func (s *sockBackend) TryReadv(iovs [][]byte) (int, error) {
	n, _, _, _, err := unix.RecvmsgBuffers(s.fd, iovs, nil, unix.MSG_TRUNC|unix.MSG_DONTWAIT)
	if errors.Is(err, unix.EAGAIN) {
		return 0, fmt.Errorf("sock: %w", ErrWouldBlock)
	}
	return n, err
}

func (s *sockBackend) PollFD() int                       { return s.fd }
func (s *sockBackend) Writev(iovs [][]byte) (int, error) { return unix.Writev(s.fd, iovs) }
func (s *sockBackend) SetVnetHdrSize(int) error          { return nil }
func (s *sockBackend) SetOffload(uint) error             { return nil }

// fuzzRAM is the guest RAM of one input: the RX rings at page 1, the TX
// rings at page 9, and buffers anywhere (descriptor addresses come from
// the input). The input gives it as patches over zeroed RAM
// (virtiotest.LoadPatches).
const (
	fuzzRAM   = 128 << 10
	fuzzRXPFN = 1
	fuzzTXPFN = 9
)

// FuzzRXTXLoops drives the device's real I/O goroutine (its virtio.Loop: RX, TX
// and the backend), as cloud-hypervisor's virtio-net fuzzer does: the
// input chooses the negotiated features, both queue sizes, the whole guest
// memory image (descriptor tables, avail and used rings with their indexes
// and event fields, buffers) and the frames the host side sends; a
// socketpair plays the tap. Whatever the input, the device must not panic or hang (Reset
// returns), must write only whole frames within the limit to the tap, and
// must deliver no more frames to the guest than the host sent.
//
// Input: [0] features selector, [1] RX size log2, [2] TX size log2,
// [3] frame count (low 3 bits; bit 7: the loop busy-polls, Config.PollMax,
// so its spin reads the hostile rings too), then per frame a le16 length,
// then the memory as patches.
func FuzzRXTXLoops(f *testing.F) {
	f.Add([]byte{0, 8, 8, 0})
	f.Add(seedLoops(0x01, 4, 4, [][]byte{make([]byte, 60)}))
	f.Add(seedLoops(0x03, 2, 3, [][]byte{make([]byte, 100), make([]byte, 1514)}))
	f.Add(seedLoops(0xff, 0, 8, [][]byte{make([]byte, 20)}))
	f.Add(seedRXHeadRepeated())
	polled := seedLoops(0x03, 4, 4, [][]byte{make([]byte, 60)})
	polled[3] |= 0x80
	f.Add(polled)
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 4 {
			return
		}
		runLoops(t, in, nil)
	})
}

// The rig is not vacuous: on a well-formed seed the real loops move every
// TX frame to the tap and the host's frame into the guest.
func TestLoopsRigMovesFrames(t *testing.T) {
	// Wait for the work itself, not for quiet: on a loaded host the
	// device's goroutine may sit unscheduled longer than settle's polls.
	done := func(s Stats) bool { return s.RX.Frames == 1 && s.TX.Frames == 16 }
	for _, poll := range []byte{0, 0x80} { // and with the loop busy-polling
		in := seedLoops(0x01, 4, 4, [][]byte{make([]byte, 60)})
		in[3] |= poll
		s, sent := runLoops(t, in, done)
		if sent != 1 || s.RX.Frames != 1 || s.TX.Frames != 16 {
			t.Fatalf("poll %#x: sent %d, stats %+v; want 1 frame in, 16 out", poll, sent, s)
		}
	}
}

// seedLoops builds an input whose rings hold well-formed chains: one RX
// buffer per descriptor and one TX frame per descriptor.
func seedLoops(feat, rxLog, txLog byte, frames [][]byte) []byte {
	return seedLoopsEdit(feat, rxLog, txLog, frames, nil)
}

// seedLoopsEdit is seedLoops with edit applied to the memory image (indexed
// by guest physical address) before it is encoded.
func seedLoopsEdit(feat, rxLog, txLog byte, frames [][]byte, edit func(mem []byte)) []byte {
	in := []byte{feat, rxLog, txLog, byte(len(frames))}
	for _, fr := range frames {
		in = binary.LittleEndian.AppendUint16(in, uint16(len(fr)))
	}
	mem := make([]byte, fuzzRAM)
	put16 := func(gpa uint64, v uint16) { binary.LittleEndian.PutUint16(mem[gpa:], v) }
	for _, q := range []struct {
		pfn  uint32
		lg   byte
		buf  uint64
		flag uint16
	}{{fuzzRXPFN, rxLog, 0x10000, 2}, {fuzzTXPFN, txLog, 0x18000, 0}} {
		size := uint16(1) << (q.lg % 9)
		desc, avail, _ := virtio.LegacyRingAddrs(q.pfn, size)
		for i := uint16(0); i < size; i++ {
			d := desc + 16*uint64(i)
			binary.LittleEndian.PutUint64(mem[d:], q.buf+uint64(i)*256)
			binary.LittleEndian.PutUint32(mem[d+8:], 256)
			binary.LittleEndian.PutUint16(mem[d+12:], q.flag)
			put16(avail+4+2*uint64(i), i)
		}
		put16(avail+2, size)
	}
	if edit != nil {
		edit(mem)
	}
	return append(in, virtiotest.Patches(mem)...)
}

// seedRXHeadRepeated is seedLoops with MRG_RXBUF whose RX ring offers head
// 0 four times, and a frame that needs three of its 256-byte buffers: RX
// holds head 0 when the ring offers it again (virtio.ErrHeadInFlight).
func seedRXHeadRepeated() []byte {
	return seedLoopsEdit(0x01, 2, 2, [][]byte{make([]byte, 600)}, func(mem []byte) {
		_, avail, _ := virtio.LegacyRingAddrs(fuzzRXPFN, 4)
		for i := uint64(0); i < 4; i++ {
			binary.LittleEndian.PutUint16(mem[avail+4+2*i:], 0)
		}
	})
}

// runLoops runs one input. With until, it waits (up to 10 s) for until to
// hold before resetting the device; without, until the device is quiet.
func runLoops(t *testing.T, in []byte, until func(Stats) bool) (Stats, int) {
	in0 := in
	sel, rxLog, txLog, nframes := in[0], in[1], in[2], int(in[3]%8)
	in = in[4:]
	var frames [][]byte
	for i := 0; i < nframes && len(in) >= 2; i++ {
		n := int(binary.LittleEndian.Uint16(in)) % 2000
		in = in[2:]
		fr := make([]byte, n)
		for j := range fr {
			fr[j] = byte(i + j) // content is not what the fuzzer explores here
		}
		frames = append(frames, fr)
	}
	ram := make([]byte, fuzzRAM)
	virtiotest.LoadPatches(ram, in)
	mem, err := guestmem.New(guestmem.Region{GPA: 0, Host: ram})
	if err != nil {
		t.Fatal(err)
	}
	features := uint64(0)
	for i, b := range []uint{FeatureMrgRxBuf, virtio.FeatureRingEventIdx, virtio.FeatureRingIndirectDesc,
		FeatureCsum, FeatureGuestCsum, FeatureHostTSO4, FeatureGuestTSO4, virtio.FeatureNotifyOnEmpty} {
		if sel&(1<<i) != 0 {
			features |= virtio.Bit(b)
		}
	}
	var queues []*virtio.Queue
	for i, q := range []struct {
		pfn uint32
		lg  byte
	}{{fuzzRXPFN, rxLog}, {fuzzTXPFN, txLog}} {
		vq := virtio.NewQueue(QueueSize)
		vq.Index = i
		vq.Size = uint16(1) << (q.lg % 9)
		vq.DescAddr, vq.AvailAddr, vq.UsedAddr = virtio.LegacyRingAddrs(q.pfn, vq.Size)
		vq.Ready = true
		vq.SetFeatures(features)
		if err := vq.Validate(mem); err != nil {
			t.Fatalf("queue %d: %v", i, err)
		}
		queues = append(queues, vq)
	}

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
				t.Errorf("fd %d still open after the input", fd)
			}
		}
	}()
	be, host := &sockBackend{fd: fds[0]}, fds[1]
	cfg := Config{MAC: testMAC}
	if in0[3]&0x80 != 0 {
		cfg.PollMax = time.Millisecond
	}
	d, err := New(be, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	for _, fr := range frames {
		if _, err := unix.Write(host, fr); err == nil {
			sent++
		}
	}
	var bells []*virtio.Doorbell
	for range 2 {
		b, err := virtio.NewDoorbell()
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close() // after the Reset below
		bells = append(bells, b)
	}
	intr := virtiotest.NewRecordingInterrupt()
	if err := d.Activate(virtio.Activation{Mem: mem, Features: features, Queues: queues,
		Bells: bells, Intr: intr}); err != nil {
		t.Fatal(err)
	}
	bells[0].Ring()
	bells[1].Ring()
	if until != nil {
		for deadline := time.Now().Add(10 * time.Second); !until(d.Stats()) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	} else {
		settle(d, mem, queues)
	}

	reset := make(chan struct{})
	go func() { d.Reset(); close(reset) }()
	select {
	case <-reset:
	case <-time.After(10 * time.Second):
		t.Fatalf("Reset did not return: a device goroutine hangs (stats %+v)", d.Stats())
	}

	s := d.Stats()
	// Every chain popped was used exactly once or is still held (RX keeps
	// chains across frames): the queue's in-flight accounting, which
	// keeps a head in flight from being popped again, agrees with the
	// rings and with what the device counted.
	for i, q := range queues {
		if q.NextUsed()+uint16(q.InFlight()) != q.NextAvail() {
			t.Fatalf("queue %d: used %d + in flight %d != popped %d", i, q.NextUsed(), q.InFlight(), q.NextAvail())
		}
	}
	if uint16(s.RX.Popped) != queues[RXQueue].NextAvail() || uint16(s.TX.Popped) != queues[TXQueue].NextAvail() {
		t.Fatalf("chains counted %d/%d, popped %d/%d", s.RX.Popped, s.TX.Popped,
			queues[RXQueue].NextAvail(), queues[TXQueue].NextAvail())
	}
	// The backend never closes here, so only the guest can stop a queue.
	for _, err := range intr.Errors() {
		var ge *virtio.GuestError
		if !errors.As(err, &ge) {
			t.Fatalf("device error %v is not a GuestError", err)
		}
	}
	hdr := hdrLen(features)
	buf := make([]byte, hdrLenMrg+maxGSOFrame+1)
	got := 0
	for {
		n, err := unix.Read(host, buf)
		if err != nil {
			break
		}
		got++
		if n < hdr+ethHeaderLen || n > hdr+maxTXFrame(features) {
			t.Fatalf("tap got a %d-byte frame (header %d, limit %d)", n, hdr, maxTXFrame(features))
		}
	}
	if uint64(got) != s.TX.Frames {
		t.Fatalf("tap got %d frames, TX counted %d", got, s.TX.Frames)
	}
	if s.RX.Frames > uint64(sent) {
		t.Fatalf("guest got %d frames, host sent %d", s.RX.Frames, sent)
	}
	return s, sent
}

// settle waits until the device's goroutine has stopped changing anything
// (stats and both used indexes stable over several polls), at most 100 ms:
// the rings the input wrote are finite, so a healthy device runs dry fast.
// On a loaded host it may stop early; that only shortens what an input
// explores, it makes no check fail.
func settle(d *Device, mem *guestmem.Memory, qs []*virtio.Queue) {
	snap := func() [3]any {
		u0, _ := mem.LoadUint16(qs[0].UsedAddr + 2)
		u1, _ := mem.LoadUint16(qs[1].UsedAddr + 2)
		return [3]any{d.Stats(), u0, u1}
	}
	last, stable := snap(), 0
	for deadline := time.Now().Add(100 * time.Millisecond); stable < 5 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Microsecond)
		now := snap()
		if reflect.DeepEqual(now, last) {
			stable++
		} else {
			stable = 0
		}
		last = now
	}
}

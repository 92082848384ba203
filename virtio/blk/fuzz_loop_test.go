package virtioblk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// fuzzDisk is the fuzz rig's backend: an in-memory disk that records any
// access outside it instead of serving it, so a device that computed a
// bad offset fails the input rather than panicking inside the backend.
// With vectored set it is also a VectoredBackend (the path File takes).
type fuzzDisk struct {
	mu      sync.Mutex
	data    []byte
	writes  int
	outside []string
}

func (d *fuzzDisk) check(op string, n int, off int64) bool {
	if off < 0 || off > int64(len(d.data)) || int64(n) > int64(len(d.data))-off {
		d.outside = append(d.outside, fmt.Sprintf("%s of %d bytes at %d", op, n, off))
		return false
	}
	return true
}

func (d *fuzzDisk) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off >= int64(len(d.data)) || !d.check("read", min(len(p), len(d.data)-int(off)), off) {
		return 0, io.EOF
	}
	n := copy(p, d.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (d *fuzzDisk) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writes++
	if !d.check("write", len(p), off) {
		return 0, errors.New("fuzzDisk: write outside the disk")
	}
	return copy(d.data[off:], p), nil
}

func (d *fuzzDisk) Sync() error          { return nil }
func (d *fuzzDisk) Size() (int64, error) { return int64(len(d.data)), nil }

// vecDisk is fuzzDisk with the vectored calls, one backend call per request.
type vecDisk struct{ *fuzzDisk }

func (d vecDisk) ReadAtv(bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := d.ReadAt(b, off+int64(total))
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (d vecDisk) WriteAtv(bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := d.WriteAt(b, off+int64(total))
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// The fuzz rig's guest RAM: the ring at page 1, buffers anywhere
// (descriptor addresses come from the input), and a disk of 64 sectors.
const (
	blkFuzzRAM  = 64 << 10
	blkFuzzPFN  = 1
	blkFuzzDisk = 64 * SectorSize
)

// FuzzBlkLoop drives the device's real I/O goroutine over hostile rings,
// as FuzzRXTXLoops does for net: the input chooses the negotiated ring
// features, read-only or not, the queue size, whether the loop busy-polls
// and whether the backend is vectored, and the whole guest memory image
// (descriptor table, avail and used rings with their indexes and event
// fields, request headers and buffers). Whatever the input, the device
// must not panic or hang (Reset returns), must touch the disk only inside
// it and never write a read-only one, must use every chain it took exactly
// once unless the guest's own error stopped the queue, and may report
// only guest errors.
//
// Input: [0] features (bit 0 EVENT_IDX, 1 INDIRECT_DESC, 2 NOTIFY_ON_EMPTY,
// 3 read-only), [1] queue size log2, [2] bit 0: busy-poll, bit 1: vectored
// backend; then the memory (virtiotest.LoadPatches).
func FuzzBlkLoop(f *testing.F) {
	f.Add([]byte{0, 7, 0})
	f.Add(seedBlkLoop(0x01, 4, 0))
	f.Add(seedBlkLoop(0x07, 2, 3))
	f.Add(seedBlkLoop(0x08, 4, 2)) // read-only: the OUT fails, nothing written
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 3 {
			return
		}
		runBlkLoop(t, in, 0)
	})
}

// The rig is not vacuous: on the well-formed seed the real loop completes
// all four requests (IN, OUT, FLUSH, GET_ID) with the right data, with and
// without busy-polling and the vectored backend.
func TestBlkLoopRigServes(t *testing.T) {
	for _, mode := range []byte{0, 1, 2, 3} {
		r := runBlkLoop(t, seedBlkLoop(0x01, 4, mode), 4)
		if r.used != 4 {
			t.Fatalf("mode %d: %d requests used, want 4", mode, r.used)
		}
		for i, want := range []byte{StatusOK, StatusOK, StatusOK, StatusOK} {
			if r.status[i] != want {
				t.Fatalf("mode %d: request %d status %d, want %d", mode, i, r.status[i], want)
			}
		}
		// The IN read sector 5; the OUT wrote 0xab over sector 9.
		for i, b := range r.ram[blkSeedIn : blkSeedIn+SectorSize] {
			if b != byte(5*SectorSize+i) {
				t.Fatalf("mode %d: IN data byte %d = %#x", mode, i, b)
			}
		}
		if r.disk[9*SectorSize] != 0xab || r.disk[10*SectorSize-1] != 0xab || r.disk[10*SectorSize] == 0xab {
			t.Fatalf("mode %d: the OUT did not write sector 9 (and only it)", mode)
		}
		if got := string(r.ram[blkSeedID : blkSeedID+4]); got != "fuzz" {
			t.Fatalf("mode %d: GET_ID answered %q", mode, got)
		}
	}
	if r := runBlkLoop(t, seedBlkLoop(0x08, 4, 0), 4); r.status[1] != StatusIOErr || r.writes != 0 {
		t.Fatalf("read-only disk: OUT status %d with %d backend writes", r.status[1], r.writes)
	}
}

// Where seedBlkLoop puts its requests' parts (guest physical addresses).
const (
	blkSeedHdr    = 0x8000 // four 16-byte headers
	blkSeedIn     = 0x9000 // the IN's data sector
	blkSeedOut    = 0xa000 // the OUT's data sector
	blkSeedID     = 0xb000 // the GET_ID answer
	blkSeedStatus = 0xc000 // four status bytes
)

// seedBlkLoop builds an input whose ring holds four well-formed requests,
// each a chain of header, data (none for FLUSH) and status: IN sector 5,
// OUT sector 9 (0xab bytes), FLUSH, GET_ID: eleven descriptors, so all
// four fit a queue of 16 or more.
func seedBlkLoop(feat, sizeLog, mode byte) []byte {
	mem := make([]byte, blkFuzzRAM)
	at := func(gpa uint64) []byte { return mem[gpa:] }
	size := uint16(1) << (sizeLog % 8)
	desc, avail, _ := virtio.LegacyRingAddrs(blkFuzzPFN, size)
	le := binary.LittleEndian
	next := uint16(0)
	put := func(addr uint64, n uint32, write, more bool) uint16 {
		d := at(desc + 16*uint64(next))
		le.PutUint64(d, addr)
		le.PutUint32(d[8:], n)
		flags := uint16(0)
		if more {
			flags |= 1
		}
		if write {
			flags |= 2
		}
		le.PutUint16(d[12:], flags)
		le.PutUint16(d[14:], next+1)
		next++
		return next - 1
	}
	for i := range SectorSize {
		at(blkSeedOut)[i] = 0xab
	}
	reqs := []struct {
		typ    uint32
		sector uint64
		data   uint64
		n      uint32
		write  bool
	}{{TypeIn, 5, blkSeedIn, SectorSize, true}, {TypeOut, 9, blkSeedOut, SectorSize, false},
		{TypeFlush, 0, 0, 0, false}, {TypeGetID, 0, blkSeedID, IDLen, true}}
	for i, r := range reqs {
		hdr := blkSeedHdr + 16*uint64(i)
		le.PutUint32(at(hdr), r.typ)
		le.PutUint64(at(hdr+8), r.sector)
		head := put(hdr, HeaderLen, false, true)
		if r.n != 0 {
			put(r.data, r.n, r.write, true)
		}
		put(blkSeedStatus+uint64(i), 1, true, false)
		le.PutUint16(at(avail+4+2*uint64(i)), head)
	}
	le.PutUint16(at(avail+2), uint16(len(reqs)))
	return append([]byte{feat, sizeLog, mode}, virtiotest.Patches(mem)...)
}

// blkLoopResult is what one input left behind.
type blkLoopResult struct {
	used      uint16
	status    [4]byte // the seed's status bytes
	ram, disk []byte
	writes    int
}

// runBlkLoop runs one input: activate, kick, wait until the used idx
// reaches want (want 0: until the device is quiet, at most 100 ms), reset,
// and check the invariants.
func runBlkLoop(t *testing.T, in []byte, want uint16) blkLoopResult {
	feat, sizeLog, mode := in[0], in[1], in[2]
	features := virtiotest.FuzzFeatures(feat)
	r := virtiotest.NewLoopRig(t, blkFuzzRAM, in[3:], features, []uint32{blkFuzzPFN}, []uint16{1 << (sizeLog % 8)})
	disk := &fuzzDisk{data: make([]byte, blkFuzzDisk)}
	for i := range disk.data {
		disk.data[i] = byte(i)
	}
	var be Backend = disk
	if mode&2 != 0 {
		be = vecDisk{disk}
	}
	cfg := Config{ReadOnly: feat&8 != 0, Serial: "fuzz"}
	if mode&1 != 0 {
		cfg.PollMax = time.Millisecond
	}
	d, err := New(be, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Activate(r.Activation(features)); err != nil {
		t.Fatal(err)
	}
	r.Run(t, d.Reset, want)

	disk.mu.Lock()
	defer disk.mu.Unlock()
	if len(disk.outside) != 0 {
		t.Fatalf("the device went outside the disk: %v", disk.outside)
	}
	if cfg.ReadOnly && disk.writes != 0 {
		t.Fatalf("%d writes to a read-only disk", disk.writes)
	}
	res := blkLoopResult{used: r.Queues[0].NextUsed(), ram: r.RAM, disk: disk.data, writes: disk.writes}
	copy(res.status[:], r.RAM[blkSeedStatus:])
	return res
}

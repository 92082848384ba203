package virtiopci

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/govm/govm/virtio"
	virtioblk "github.com/govm/govm/virtio/blk"
	virtionet "github.com/govm/govm/virtio/net"
	"github.com/govm/govm/virtio/virtiotest"
)

// The fuzz rig's backends (an in-memory disk, a socketpair for the tap)
// and its well-formed seeds.

// sectorByte is what every byte of the disk's sector s holds.
func sectorByte(s int) byte { return byte(0xA0 + s) }

// diskImage is the disk: sector s is all sectorByte(s).
func diskImage() []byte {
	b := make([]byte, diskBytes)
	for i := range b {
		b[i] = sectorByte(i / virtioblk.SectorSize)
	}
	return b
}

// memDisk is an in-memory virtioblk.Backend.
type memDisk struct {
	mu   sync.Mutex
	data []byte
}

func (m *memDisk) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off < 0 || off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(p, m.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memDisk) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off < 0 || off+int64(len(p)) > int64(len(m.data)) {
		return 0, io.ErrShortWrite
	}
	return copy(m.data[off:], p), nil
}

func (m *memDisk) Sync() error          { return nil }
func (m *memDisk) Size() (int64, error) { return int64(len(m.data)), nil }

// sockBackend is a virtionet.Backend over one end of an AF_UNIX
// SOCK_SEQPACKET socketpair standing in for the tap (a copy of the one in
// virtio/net's tests): frame boundaries kept, reads report the frame's full
// length (MSG_TRUNC) like tun, non-blocking.
type sockBackend struct{ fd int }

func (s *sockBackend) TryReadv(iovs [][]byte) (int, error) {
	n, _, _, _, err := unix.RecvmsgBuffers(s.fd, iovs, nil, unix.MSG_TRUNC|unix.MSG_DONTWAIT)
	if errors.Is(err, unix.EAGAIN) {
		return 0, fmt.Errorf("sock: %w", virtionet.ErrWouldBlock)
	}
	return n, err
}

func (s *sockBackend) PollFD() int                       { return s.fd }
func (s *sockBackend) Writev(iovs [][]byte) (int, error) { return unix.Writev(s.fd, iovs) }
func (s *sockBackend) SetVnetHdrSize(int) error          { return nil }
func (s *sockBackend) SetOffload(uint) error             { return nil }

// devSeeds: each device driven to DRIVER_OK over well-formed rings holding
// one request (blk) or one TX frame and one RX buffer (net), with no
// features and with every offered feature, and one that resets and
// re-activates over the same rings.
func devSeeds() [][]byte {
	var seeds [][]byte
	for kind := byte(0); kind < 3; kind++ {
		seeds = append(seeds, devSeed(kind, false), devSeed(kind, true))
	}
	seeds = append(seeds, reinit(devSeed(devBlkMem, false)), reinit(devSeed(devNet, false)),
		devSeed(devBlkMem|0x80, false), devSeed(devNet|0x80, true))
	return seeds
}

// seedOp encodes one op (see devRig.op); width 1, 2 or 4.
func seedOp(kind byte, off uint16, width int, v byte) []byte {
	return []byte{kind, byte(off), map[int]byte{1: 0, 2: 1, 4: 2}[width], v}
}

// devSeed is the driver's legacy bring-up (spec 3.1.1, 4.1.4.8) of device
// kind (with bit 7: busy-polling), then a kick, pauses and ISR reads.
func devSeed(kind byte, allFeatures bool) []byte {
	isNet := devKind(kind) == devNet
	var ops [][]byte
	ops = append(ops,
		seedOp(1, LegacyStatus, 1, StatusAcknowledge),
		seedOp(1, LegacyStatus, 1, StatusAcknowledge|StatusDriver),
		seedOp(0, LegacyHostFeatures, 4, 0))
	feat := seedOp(1, LegacyGuestFeatures, 4, 0)
	if allFeatures {
		feat = []byte{1, LegacyGuestFeatures, 2 | 4, 0xFF} // accept all offered
	}
	ops = append(ops, feat,
		seedOp(1, LegacyQueueSelect, 2, 0), seedOp(0, LegacyQueueSize, 2, 0),
		seedOp(1, LegacyQueuePFN, 4, seedPFN0))
	if isNet {
		ops = append(ops, seedOp(1, LegacyQueueSelect, 2, 1), seedOp(1, LegacyQueuePFN, 4, seedPFN1))
	}
	ops = append(ops, seedOp(1, LegacyStatus, 1, StatusAcknowledge|StatusDriver|StatusDriverOK))
	if isNet {
		ops = append(ops, seedOp(3, 0, 1, 60-14), seedOp(1, LegacyQueueNotify, 2, 1))
	}
	ops = append(ops, seedOp(1, LegacyQueueNotify, 2, 0),
		seedOp(2, 0, 1, 7), seedOp(0, LegacyISR, 1, 0), seedOp(2, 0, 1, 7), seedOp(0, LegacyISR, 1, 0))

	in := []byte{kind, byte(len(ops))}
	for _, o := range ops {
		in = append(in, o...)
	}
	ram := make([]byte, devRAM)
	le := binary.LittleEndian
	desc := func(pfn uint32, size, i uint16, addr uint64, n uint32, flags, next uint16) {
		d, _, _ := virtio.LegacyRingAddrs(pfn, size)
		d += 16 * uint64(i)
		le.PutUint64(ram[d:], addr)
		le.PutUint32(ram[d+8:], n)
		le.PutUint16(ram[d+12:], flags)
		le.PutUint16(ram[d+14:], next)
	}
	avail := func(pfn uint32, size uint16) { // one chain, head 0
		_, a, _ := virtio.LegacyRingAddrs(pfn, size)
		le.PutUint16(ram[a+2:], 1)
	}
	const next, write = 1, 2
	if isNet {
		desc(seedPFN0, virtionet.QueueSize, 0, seedRXBuf, seedRXBufLen, write, 0)
		avail(seedPFN0, virtionet.QueueSize)
		desc(seedPFN1, virtionet.QueueSize, 0, seedTXBuf, seedTXLen, 0, 0)
		avail(seedPFN1, virtionet.QueueSize)
		for i := 10; i < seedTXLen; i++ { // the frame after the zero vnet header
			ram[seedTXBuf+i] = byte(i)
		}
	} else {
		desc(seedPFN0, virtioblk.QueueSize, 0, seedBlkHdr, virtioblk.HeaderLen, next, 1)
		desc(seedPFN0, virtioblk.QueueSize, 1, seedBlkData, virtioblk.SectorSize, next|write, 2)
		desc(seedPFN0, virtioblk.QueueSize, 2, seedBlkStat, 1, write, 0)
		avail(seedPFN0, virtioblk.QueueSize)
		le.PutUint32(ram[seedBlkHdr:], virtioblk.TypeIn)
		le.PutUint64(ram[seedBlkHdr+8:], seedSector)
		ram[seedBlkStat] = 0xFF
	}
	return append(in, virtiotest.Patches(ram)...)
}

// reinit inserts, after a seed's ops, a reset and a second bring-up over
// the same rings (the device has used head 0 once already).
func reinit(in []byte) []byte {
	n := int(in[1])
	ops, ram := in[2:2+4*n], in[2+4*n:]
	more := [][]byte{seedOp(1, LegacyStatus, 1, 0), seedOp(1, LegacyQueuePFN, 4, seedPFN0)}
	if devKind(in[0]) == devNet {
		more = append(more, seedOp(1, LegacyQueueSelect, 2, 1), seedOp(1, LegacyQueuePFN, 4, seedPFN1))
	}
	more = append(more, seedOp(1, LegacyStatus, 1, StatusDriverOK), seedOp(1, LegacyQueueNotify, 2, 0),
		seedOp(2, 0, 1, 7))
	out := []byte{in[0], byte(n + len(more))}
	out = append(out, ops...)
	for _, o := range more {
		out = append(out, o...)
	}
	return append(out, ram...)
}

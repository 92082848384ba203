package virtionet

import (
	"encoding/binary"
	"testing"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// FuzzTXChain feeds arbitrary descriptor tables and chain contents to the
// TX path: Pop must reject what is malformed, and send must neither panic
// nor hand the backend anything but the chain's readable bytes, within the
// frame limit.
func FuzzTXChain(f *testing.F) {
	seed := func(features uint64, descs ...[4]uint64) []byte {
		b := binary.LittleEndian.AppendUint64(nil, features)
		for _, d := range descs {
			b = binary.LittleEndian.AppendUint32(b, uint32(d[0]))
			b = binary.LittleEndian.AppendUint32(b, uint32(d[1]))
			b = binary.LittleEndian.AppendUint16(b, uint16(d[2]))
			b = binary.LittleEndian.AppendUint16(b, uint16(d[3]))
		}
		return b
	}
	f.Add(seed(0, [4]uint64{0x300000, 100, 0, 0}), []byte{})
	f.Add(seed(feat(FeatureCsum, FeatureHostTSO4), [4]uint64{0x300000, 10, 1, 1}, [4]uint64{0x300010, 60, 0, 0}),
		gsoHdr(10, gsoTCPv4))
	f.Add(seed(feat(virtio.FeatureRingIndirectDesc), [4]uint64{0x300000, 32, 4, 0}), []byte{0, 0, 0x30, 0, 0, 0, 0, 0, 100})
	f.Add(seed(feat(FeatureMrgRxBuf), [4]uint64{0x300000, 1600, 1, 1}, [4]uint64{0x300000, 1, 0, 0}), []byte{1, 1, 1})
	f.Fuzz(func(t *testing.T, table, data []byte) {
		if len(table) < 8 {
			return
		}
		features := binary.LittleEndian.Uint64(table) & (virtio.RingFeatures | (1<<16 - 1))
		ds := virtiotest.NewQueues(t, 4<<20, 8, 8)
		txd := ds[1]
		txd.SetFeatures(features)
		// Descriptors point into guest RAM at 0x300000 + addr, or
		// anywhere when the high bit is set, to reach the bounds checks.
		for i, b := 0, table[8:]; i < 8 && len(b) >= 12; i, b = i+1, b[12:] {
			addr := uint64(binary.LittleEndian.Uint32(b))
			if addr&(1<<31) == 0 {
				addr = 0x300000 + addr%0x100000
			} else {
				addr <<= 8
			}
			txd.SetDesc(uint16(i), addr, binary.LittleEndian.Uint32(b[4:])%0x20000,
				binary.LittleEndian.Uint16(b[8:]), binary.LittleEndian.Uint16(b[10:]))
		}
		copy(txd.RAM[0x300000:], data)
		txd.SetAvailRing(0, 0)
		txd.SetAvailIdx(1)
		be := newFake(t, false)
		d, err := New(be, Config{MAC: testMAC})
		if err != nil {
			t.Fatal(err)
		}
		a := virtiotest.Activation(virtiotest.NewRecordingInterrupt(), features, ds...)
		tx := newTX(d, a, hdrLen(features), make(chan struct{}))
		c, err := txd.Queue.Pop(txd.Mem)
		if err != nil || c == nil {
			return
		}
		if err := tx.send(c); err != nil {
			t.Fatalf("send: %v", err)
		}
		s := d.Stats().TX
		w := be.written()
		if s.Frames+s.DropMalformed+s.DropTooLarge != 1 || uint64(len(w)) != s.Frames {
			t.Fatalf("one chain, stats %v, %d written", s, len(w))
		}
		if len(w) == 1 {
			if uint64(len(w[0])) != c.ReadableLen() || len(w[0]) > tx.hdr+tx.max || len(w[0]) < tx.hdr+ethHeaderLen {
				t.Fatalf("wrote %d bytes of a %d-byte chain", len(w[0]), c.ReadableLen())
			}
		}
	})
}

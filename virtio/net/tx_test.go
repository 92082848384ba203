package virtionet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/govm/govm/virtio"
)

// gsoHdr is a header asking for TSO of the given type.
func gsoHdr(n int, gso byte) []byte {
	h := make([]byte, n)
	h[0] = hdrFNeedsCsum
	h[1] = gso
	binary.LittleEndian.PutUint16(h[2:], 54)   // hdr_len
	binary.LittleEndian.PutUint16(h[4:], 1448) // gso_size
	binary.LittleEndian.PutUint16(h[6:], 34)
	binary.LittleEndian.PutUint16(h[8:], 16)
	return h
}

func TestTXChainLayouts(t *testing.T) {
	all := feat(FeatureCsum, FeatureHostTSO4, FeatureHostTSO6, FeatureHostECN, virtio.FeatureRingIndirectDesc)
	f := frame(300, 5)
	h := gsoHdr(hdrLenBase, gsoTCPv4)
	tests := []struct {
		name  string
		feat  uint64
		build func(e *env) uint16
		want  []byte
	}{
		{"one buffer", all, func(e *env) uint16 {
			return e.tx.AddChain([][]byte{append(append([]byte{}, h...), f...)}, nil)
		}, append(append([]byte{}, h...), f...)},
		{"header then frame", all, func(e *env) uint16 {
			return e.tx.AddChain([][]byte{h, f}, nil)
		}, append(append([]byte{}, h...), f...)},
		{"split mid-field", all, func(e *env) uint16 {
			b := append(append([]byte{}, h...), f...)
			return e.tx.AddChain([][]byte{b[:3], b[3:11], b[11:100], b[100:]}, nil)
		}, append(append([]byte{}, h...), f...)},
		{"indirect", all, func(e *env) uint16 {
			return e.tx.AddIndirectChain([][]byte{h, f[:50], f[50:]}, nil)
		}, append(append([]byte{}, h...), f...)},
		{"direct then indirect", all, func(e *env) uint16 {
			head := e.tx.Prepend(h, e.tx.BuildIndirectChain([][]byte{f}, nil))
			e.tx.PublishAvail(head)
			return head
		}, append(append([]byte{}, h...), f...)},
		{"mrg header", all | feat(FeatureMrgRxBuf), func(e *env) uint16 {
			return e.tx.AddChain([][]byte{gsoHdr(hdrLenMrg, gsoTCPv6), f}, nil)
		}, append(gsoHdr(hdrLenMrg, gsoTCPv6), f...)},
		{"trailing writable ignored", all, func(e *env) uint16 {
			return e.tx.AddChain([][]byte{h, f}, []int{64})
		}, append(append([]byte{}, h...), f...)},
		{"max plain frame", 0, func(e *env) uint16 {
			return e.tx.AddChain([][]byte{make([]byte, hdrLenBase), frame(maxFrame, 1)}, nil)
		}, append(make([]byte, hdrLenBase), frame(maxFrame, 1)...)},
		{"max TSO frame", all, func(e *env) uint16 {
			return e.tx.AddChain([][]byte{h, frame(maxGSOFrame, 1)}, nil)
		}, append(append([]byte{}, h...), frame(maxGSOFrame, 1)...)},
	}
	for _, tt := range tests {
		e := newEnv(t, tt.feat, false)
		head := tt.build(e)
		// The device may take the chain in its first pass, before it
		// asked for kicks, so whether the driver kicks depends on timing;
		// a kick that was sent is counted when the device wakes on it,
		// which can be after used idx moved.
		var kicks uint64
		if e.tx.KickIfNeeded() {
			kicks = 1
		}
		e.waitUsed(e.tx, 1)
		u := e.tx.Collect()
		if u[0].ID != head || u[0].Len != 0 {
			t.Errorf("%s: used %+v, want head %d len 0", tt.name, u[0], head)
		}
		w := e.be.written()
		if len(w) != 1 || !bytes.Equal(w[0], tt.want) {
			t.Errorf("%s: backend got %d frames, first %d bytes; want %d bytes", tt.name, len(w), lenFirst(w), len(tt.want))
		}
		e.waitTXKicks(kicks)
		if s := e.dev.Stats().TX; s.Frames != 1 || s.Bytes != uint64(len(tt.want)-e.hdr) || s.Popped != 1 || e.tx.Queue.Watch().KicksTaken.Load() != kicks {
			t.Errorf("%s: stats %v, kicks %d", tt.name, s, e.tx.Queue.Watch().KicksTaken.Load())
		}
		e.dev.Reset()
	}
}

func lenFirst(w [][]byte) int {
	if len(w) == 0 {
		return -1
	}
	return len(w[0])
}

// TestTXManyBuffers: a chain of more buffers than writev takes is gathered
// through the copy path, header first.
func TestTXManyBuffers(t *testing.T) {
	e := newEnv(t, feat(virtio.FeatureRingIndirectDesc), false)
	f := frame(1500, 3)
	parts := [][]byte{make([]byte, hdrLenBase)}
	for i := 0; i < 1500; i++ {
		parts = append(parts, f[i:i+1])
	}
	e.tx.AddIndirectChain(parts, nil)
	e.tx.KickIfNeeded()
	e.waitUsed(e.tx, 1)
	w := e.be.written()
	if len(w) != 1 || !bytes.Equal(w[0], append(make([]byte, hdrLenBase), f...)) {
		t.Errorf("gathered frame differs")
	}
}

func TestTXDropped(t *testing.T) {
	tso := feat(FeatureCsum, FeatureHostTSO4)
	tests := []struct {
		name      string
		feat      uint64
		out       [][]byte
		writeErr  error
		large     uint64
		malformed uint64
		backend   uint64
	}{
		{"empty readable part", 0, nil, nil, 0, 1, 0},
		{"header only", 0, [][]byte{make([]byte, 10)}, nil, 0, 1, 0},
		{"short frame", 0, [][]byte{make([]byte, 10), make([]byte, 13)}, nil, 0, 1, 0},
		{"mrg header too short", feat(FeatureMrgRxBuf), [][]byte{make([]byte, 10), make([]byte, 15)}, nil, 0, 1, 0},
		{"oversize plain", tso &^ feat(FeatureHostTSO4), [][]byte{make([]byte, 10), frame(maxFrame+1, 0)}, nil, 1, 0, 0},
		{"oversize TSO", tso, [][]byte{gsoHdr(10, gsoTCPv4), frame(maxGSOFrame+1, 0)}, nil, 1, 0, 0},
		{"TSO4 not negotiated", feat(FeatureCsum), [][]byte{gsoHdr(10, gsoTCPv4), frame(60, 0)}, nil, 0, 1, 0},
		{"TSO6 not negotiated", tso, [][]byte{gsoHdr(10, gsoTCPv6), frame(60, 0)}, nil, 0, 1, 0},
		{"ECN not negotiated", tso, [][]byte{gsoHdr(10, gsoTCPv4|gsoECN), frame(60, 0)}, nil, 0, 1, 0},
		{"UDP gso", tso, [][]byte{gsoHdr(10, 3), frame(60, 0)}, nil, 0, 1, 0},
		{"gso_size 0", tso, [][]byte{func() []byte { h := gsoHdr(10, gsoTCPv4); h[4], h[5] = 0, 0; return h }(), frame(60, 0)}, nil, 0, 1, 0},
		{"NEEDS_CSUM without CSUM", 0, [][]byte{hdrWith(10), frame(60, 0)}, nil, 0, 1, 0},
		{"backend rejects", 0, [][]byte{make([]byte, 10), frame(60, 0)}, errors.New("tap: writev: invalid argument"), 0, 0, 1},
	}
	for _, tt := range tests {
		e := newEnv(t, tt.feat, false)
		e.be.mu.Lock()
		e.be.writeErr = tt.writeErr
		e.be.mu.Unlock()
		if tt.out == nil {
			e.tx.AddChain(nil, []int{64})
		} else {
			e.tx.AddChain(tt.out, nil)
		}
		e.tx.KickIfNeeded()
		e.waitUsed(e.tx, 1)
		s := e.dev.Stats().TX
		if s.DropTooLarge != tt.large || s.DropMalformed != tt.malformed || s.DropBackend != tt.backend || s.Frames != 0 {
			t.Errorf("%s: stats %v", tt.name, s)
		}
		// The queue goes on: a good frame follows.
		e.be.mu.Lock()
		e.be.writeErr = nil
		e.be.mu.Unlock()
		e.tx.Collect()
		e.tx.AddChain([][]byte{make([]byte, e.hdr), frame(60, 9)}, nil)
		e.tx.KickIfNeeded()
		e.waitUsed(e.tx, 2)
		if w := e.be.written(); len(w) != 1 || seqOf(w[0][e.hdr:]) != 9 {
			t.Errorf("%s: following frame not sent", tt.name)
		}
		if errs := e.intr.Errors(); len(errs) != 0 {
			t.Errorf("%s: DeviceError %v for a dropped frame", tt.name, errs)
		}
		e.dev.Reset()
	}
}

func TestTXBackendClosed(t *testing.T) {
	e := newEnv(t, 0, false)
	e.be.writeErr = os.ErrClosed
	e.tx.AddChain([][]byte{make([]byte, 10), frame(60, 0)}, nil)
	e.tx.KickIfNeeded()
	if !e.intr.WaitFor(2*time.Second, func() bool { return len(e.intr.Errors()) == 1 }) {
		t.Fatalf("closed backend not reported")
	}
	if err, want := e.intr.Errors()[0], "queue 1: backend: "+os.ErrClosed.Error(); err.Error() != want {
		t.Fatalf("DeviceError says %q, want %q (which queue, what the backend said)", err, want)
	}
}

func TestTXGuestErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env)
		want  error
		msg   string // the exact text, when given
	}{
		{"avail idx jump", func(e *env) { e.tx.SetAvailIdx(QueueSize + 1) }, virtio.ErrAvailIdx,
			"virtio: queue 1: avail index jumped: avail idx 257 is 257 ahead of next 0 (size 256)"},
		{"descriptor loop", func(e *env) {
			e.tx.SetDesc(0, 0x300000, 16, virtio.DescFlagNext, 1)
			e.tx.SetDesc(1, 0x300000, 16, virtio.DescFlagNext, 0)
			e.tx.SetAvailRing(0, 0)
			e.tx.SetAvailIdx(1)
		}, virtio.ErrDescLoop, ""},
		{"buffer outside RAM", func(e *env) {
			e.tx.SetDesc(0, 1<<40, 100, 0, 0)
			e.tx.SetAvailRing(0, 0)
			e.tx.SetAvailIdx(1)
		}, virtio.ErrDescBuffer, ""},
		{"indirect not negotiated", func(e *env) {
			e.tx.SetDesc(0, 0x300000, 32, virtio.DescFlagIndirect, 0)
			e.tx.SetAvailRing(0, 0)
			e.tx.SetAvailIdx(1)
		}, virtio.ErrIndirect, ""},
	}
	for _, tt := range tests {
		e := newEnv(t, 0, false)
		tt.setup(e)
		e.tx.Kick()
		if !e.intr.WaitFor(2*time.Second, func() bool { return len(e.intr.Errors()) > 0 }) {
			t.Fatalf("%s: no DeviceError", tt.name)
		}
		if err := e.intr.Errors()[0]; !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		if err := e.intr.Errors()[0]; tt.msg != "" && err.Error() != tt.msg {
			t.Errorf("%s: DeviceError says %q, want %q", tt.name, err, tt.msg)
		}
		e.dev.Reset()
	}
}

// TestInterruptSuppression: TX completions interrupt unless the driver
// suppressed them, with the avail flag or with used_event.
func TestInterruptSuppression(t *testing.T) {
	send := func(e *env, n int) {
		idx := e.tx.UsedIdx()
		for i := 0; i < n; i++ {
			e.tx.AddChain([][]byte{make([]byte, e.hdr), frame(60, uint32(i))}, nil)
		}
		e.tx.Kick()
		e.waitUsed(e.tx, idx+uint16(n))
		e.tx.Collect()
		time.Sleep(10 * time.Millisecond) // the interrupt follows AddUsed
	}
	e := newEnv(t, 0, false)
	e.tx.SetAvailFlags(virtio.AvailFlagNoInterrupt)
	send(e, 3)
	if n := e.intr.Used(TXQueue); n != 0 {
		t.Errorf("NO_INTERRUPT: %d interrupts", n)
	}
	e.tx.SetAvailFlags(0)
	send(e, 1)
	if n := e.intr.Used(TXQueue); n != 1 {
		t.Errorf("interrupts enabled: %d interrupts, want 1", n)
	}
	e.dev.Reset()

	e = newEnv(t, feat(virtio.FeatureRingEventIdx), false)
	e.tx.SetUsedEvent(100) // interrupt me when used idx passes 100
	send(e, 3)
	if n := e.intr.Used(TXQueue); n != 0 {
		t.Errorf("used_event 100 after 3: %d interrupts", n)
	}
	e.tx.SetUsedEvent(3) // the next completion (used idx 3 -> 4) crosses it
	send(e, 1)
	if n := e.intr.Used(TXQueue); n != 1 {
		t.Errorf("used_event reached: %d interrupts, want 1", n)
	}
	if n := e.tx.Queue.Watch().InterruptsWanted.Load(); n != 1 {
		t.Errorf("%d interrupts wanted, want 1", n)
	}
}

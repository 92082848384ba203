package virtio_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

const memSize = 64 << 10

var indirectFeatures = virtio.Bit(virtio.FeatureRingIndirectDesc)

func TestLegacyRingAddrs(t *testing.T) {
	tests := []struct {
		pfn               uint32
		size              uint16
		desc, avail, used uint64
		total             uint64
	}{
		// Linux vring_size(256, 4096) = 10246: desc 4096, avail 518,
		// pad to 8192, used 6+2048.
		{1, 256, 0x1000, 0x2000, 0x3000, 10246},
		{1, 128, 0x1000, 0x1800, 0x2000, 0x1000 + 6 + 8*128},
		{0x10, 16, 0x10000, 0x10100, 0x11000, 0x1000 + 6 + 8*16},
	}
	for _, tt := range tests {
		desc, avail, used := virtio.LegacyRingAddrs(tt.pfn, tt.size)
		if desc != tt.desc || avail != tt.avail || used != tt.used {
			t.Errorf("LegacyRingAddrs(%d, %d) = %#x %#x %#x, want %#x %#x %#x",
				tt.pfn, tt.size, desc, avail, used, tt.desc, tt.avail, tt.used)
		}
		if got := virtio.LegacyRingBytes(tt.size); got != tt.total {
			t.Errorf("LegacyRingBytes(%d) = %d, want %d", tt.size, got, tt.total)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(q *virtio.Queue)
		want   error
	}{
		{"good", func(q *virtio.Queue) {}, nil},
		{"not ready", func(q *virtio.Queue) { q.Ready = false }, virtio.ErrQueueNotReady},
		{"size not power of 2", func(q *virtio.Queue) { q.Size = 12 }, virtio.ErrBadRing},
		{"size zero", func(q *virtio.Queue) { q.Size = 0 }, virtio.ErrBadRing},
		{"size above max", func(q *virtio.Queue) { q.Size = 32 }, virtio.ErrBadRing},
		{"desc misaligned", func(q *virtio.Queue) { q.DescAddr += 8 }, virtio.ErrBadRing},
		{"avail misaligned", func(q *virtio.Queue) { q.AvailAddr++ }, virtio.ErrBadRing},
		{"used misaligned", func(q *virtio.Queue) { q.UsedAddr += 2 }, virtio.ErrBadRing},
		{"used beyond RAM", func(q *virtio.Queue) { q.UsedAddr = memSize - 16 }, virtio.ErrBadRing},
		{"desc wraps", func(q *virtio.Queue) { q.DescAddr = ^uint64(0) &^ 15 }, virtio.ErrBadRing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := virtiotest.New(t, memSize, 16)
			tt.modify(d.Queue)
			err := d.Queue.Validate(d.Mem)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestPopEmptyAndNotReady(t *testing.T) {
	d := virtiotest.New(t, memSize, 16)
	c, err := d.Queue.Pop(d.Mem)
	if c != nil || err != nil {
		t.Fatalf("Pop on empty ring = %v, %v; want nil, nil", c, err)
	}
	d.Queue.Reset()
	if _, err := d.Queue.Pop(d.Mem); !errors.Is(err, virtio.ErrQueueNotReady) {
		t.Fatalf("Pop after Reset = %v, want ErrQueueNotReady", err)
	}
	if d.Queue.Size != 16 || d.Queue.NextAvail() != 0 || d.Queue.DescAddr != 0 {
		t.Fatalf("Reset left %v", d.Queue)
	}
}

// roundTrip pops one chain, checks its readable contents are want, writes
// resp into it and completes it; it returns what the driver got back.
func roundTrip(t *testing.T, d *virtiotest.Driver, want []byte, resp []byte) virtiotest.UsedElem {
	t.Helper()
	c, err := d.Queue.Pop(d.Mem)
	if err != nil || c == nil {
		t.Fatalf("Pop = %v, %v", c, err)
	}
	got, err := io.ReadAll(c.Reader())
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("readable part = %q, want %q", got, want)
	}
	if c.ReadableLen() != uint64(len(want)) {
		t.Fatalf("ReadableLen = %d, want %d", c.ReadableLen(), len(want))
	}
	if _, err := c.Writer().Write(resp); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if c.Written() != uint32(len(resp)) {
		t.Fatalf("Written = %d, want %d", c.Written(), len(resp))
	}
	if err := d.Queue.AddUsed(d.Mem, c.Head, c.Written()); err != nil {
		t.Fatalf("AddUsed: %v", err)
	}
	es := d.Collect()
	if len(es) != 1 || es[0].ID != c.Head || es[0].Len != uint32(len(resp)) {
		t.Fatalf("used = %+v, want head %d len %d", es, c.Head, len(resp))
	}
	return es[0]
}

func TestPopHappy(t *testing.T) {
	out := [][]byte{[]byte("header--"), []byte("payload that spans"), {}}
	in := []int{3, 5, 1}
	resp := []byte("ABCDEFGHI")
	tests := []struct {
		name     string
		features uint64
		add      func(d *virtiotest.Driver) uint16
	}{
		{"direct", 0, func(d *virtiotest.Driver) uint16 { return d.AddChain(out, in) }},
		{"indirect", indirectFeatures, func(d *virtiotest.Driver) uint16 { return d.AddIndirectChain(out, in) }},
		{"direct then indirect", indirectFeatures, func(d *virtiotest.Driver) uint16 {
			// Spec 2.7.5.3.2: direct descriptors followed by one
			// indirect descriptor form a single chain.
			head := d.Prepend(out[0], d.BuildIndirectChain(out[1:], in))
			d.PublishAvail(head)
			return head
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := virtiotest.New(t, memSize, 16)
			d.SetFeatures(tt.features)
			tt.add(d)
			e := roundTrip(t, d, bytes.Join(out, nil), resp)
			got := bytes.Join(e.In, nil)
			if !bytes.Equal(got, resp) {
				t.Fatalf("driver sees %q, want %q", got, resp)
			}
		})
	}
}

func TestWriterShort(t *testing.T) {
	d := virtiotest.New(t, memSize, 16)
	d.AddChain(nil, []int{2, 2})
	c, _ := d.Queue.Pop(d.Mem)
	n, err := c.Writer().Write([]byte("12345"))
	if n != 4 || !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("Write past end = %d, %v; want 4, ErrShortWrite", n, err)
	}
	if c.WritableLen() != 4 || c.Written() != 4 {
		t.Fatalf("WritableLen %d Written %d, want 4 4", c.WritableLen(), c.Written())
	}
	if err := c.WriteAtEnd([]byte("xyz12")); !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("WriteAtEnd too long = %v", err)
	}
	if err := c.WriteAtEnd([]byte("S")); err != nil || c.Written() != 4 {
		t.Fatalf("WriteAtEnd = %v, Written %d", err, c.Written())
	}
}

func TestWriteAtEndCountsStatusOnly(t *testing.T) {
	d := virtiotest.New(t, memSize, 16)
	d.AddChain([][]byte{[]byte("h")}, []int{512, 1})
	c, _ := d.Queue.Pop(d.Mem)
	if err := c.WriteAtEnd([]byte{7}); err != nil {
		t.Fatal(err)
	}
	if c.Written() != 1 {
		t.Fatalf("Written = %d, want 1 (status only)", c.Written())
	}
	_ = d.Queue.AddUsed(d.Mem, c.Head, c.Written())
	e := d.Collect()[0]
	if e.In[1][0] != 7 || e.In[0][0] != 0 {
		t.Fatalf("status byte not last: %v / %v", e.In[1], e.In[0][:4])
	}
}

// TestIndexWrap runs more than 65536 chains through a small queue so the
// free-running 16-bit avail and used indexes wrap (spec 2.7.6).
func TestIndexWrap(t *testing.T) {
	for _, indirect := range []bool{false, true} {
		d := virtiotest.New(t, memSize, 4)
		d.SetFeatures(indirectFeatures)
		for i := 0; i < 70000; i++ {
			b := []byte{byte(i), byte(i >> 8), byte(i >> 16)}
			if indirect {
				d.AddIndirectChain([][]byte{b}, []int{1})
			} else {
				d.AddChain([][]byte{b}, []int{1})
			}
			e := roundTrip(t, d, b, []byte{byte(i)})
			if e.In[0][0] != byte(i) {
				t.Fatalf("chain %d: got %d", i, e.In[0][0])
			}
		}
		if d.UsedIdx() != uint16(70000%65536) || d.Queue.NextAvail() != uint16(70000%65536) {
			t.Fatalf("indexes %d/%d after 70000 chains", d.UsedIdx(), d.Queue.NextAvail())
		}
	}
}

func TestAddUsedBadHead(t *testing.T) {
	d := virtiotest.New(t, memSize, 16)
	if err := d.Queue.AddUsed(d.Mem, 16, 0); !errors.Is(err, virtio.ErrBadHead) {
		t.Fatalf("AddUsed(16) = %v, want ErrBadHead", err)
	}
	if d.UsedIdx() != 0 {
		t.Fatalf("used idx moved to %d", d.UsedIdx())
	}
}

func TestGuestErrorMessage(t *testing.T) {
	e := &virtio.GuestError{Queue: 0, Head: 5, HeadValid: true, Err: virtio.ErrDescLoop}
	if got := e.Error(); got != "virtio: queue 0 head 5: descriptor loop" {
		t.Fatalf("Error() = %q", got)
	}
	e = &virtio.GuestError{Queue: 1, Err: virtio.ErrAvailIdx, Reason: "idx 9"}
	if got := e.Error(); got != "virtio: queue 1: avail index jumped: idx 9" {
		t.Fatalf("Error() = %q", got)
	}
}

// sameMem is used by the hostile tests: Pop must not write guest memory.
func sameMem(t *testing.T, mem *guestmem.Memory, before []byte) {
	t.Helper()
	after, _ := mem.Slice(0, uint64(len(before)))
	if !bytes.Equal(before, after) {
		for i := range before {
			if before[i] != after[i] {
				t.Fatalf("guest memory changed at %#x", i)
			}
		}
	}
}

// countLoads counts the observed reads of one guest address.
type countLoads struct {
	gpa   uint64
	loads int
}

func (c *countLoads) Access(gpa, n uint64, write bool) {
	if !write && gpa == c.gpa {
		c.loads++
	}
}

// Pop reads avail idx only when it has consumed every entry the last read
// covered (QEMU's shadow_avail_idx): reading it for every chain would
// pull its cache line from the driver's CPU for every chain. Entries
// published after the read are still found, at the next catch-up.
func TestPopReadsAvailIdxOnce(t *testing.T) {
	d := virtiotest.New(t, 1<<20, 16)
	c := &countLoads{gpa: d.AvailAddr() + 2}
	mem := d.Mem.Observed(c)
	var heads []uint16
	for i := 0; i < 5; i++ {
		heads = append(heads, d.BuildChain([][]byte{{byte(i)}}, nil))
	}
	d.PublishAvail(heads...)
	for i := 0; i < 5; i++ {
		ch, err := d.Queue.Pop(mem)
		if err != nil || ch == nil || ch.Head != heads[i] {
			t.Fatalf("pop %d: %v, %v; want head %d", i, ch, err, heads[i])
		}
		if i == 2 {
			// Published while the device is behind: found after
			// the five the first read covered.
			d.PublishAvail(d.BuildChain([][]byte{{9}}, nil))
		}
	}
	if c.loads != 1 {
		t.Fatalf("avail idx read %d times for 5 chains published at once, want 1", c.loads)
	}
	if ch, err := d.Queue.Pop(mem); err != nil || ch == nil {
		t.Fatalf("the chain published after the first read: %v, %v", ch, err)
	}
	if ch, err := d.Queue.Pop(mem); err != nil || ch != nil {
		t.Fatalf("empty ring: %v, %v", ch, err)
	}
	if c.loads != 3 {
		t.Fatalf("avail idx read %d times in all, want 3 (once per catch-up)", c.loads)
	}
}

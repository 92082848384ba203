package virtioblk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
	"golang.org/x/sys/unix"
)

// testDisk is a backend under test with a way to look at and shrink what
// it holds, so one table covers the vectored (File) and plain (memBackend)
// paths.
type testDisk struct {
	name   string
	be     Backend
	data   func() []byte
	shrink func(n int)
}

// pattern is the initial disk contents: every byte of sector s is s.
func pattern(sectors int) []byte {
	b := make([]byte, sectors*SectorSize)
	for i := range b {
		b[i] = byte(i / SectorSize)
	}
	return b
}

func testDisks(t *testing.T, readOnlyFile bool) []testDisk {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(p, pattern(diskSectors), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(p, readOnlyFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mem := &memBackend{data: pattern(diskSectors)}
	return []testDisk{
		{"file", f, func() []byte {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, func(n int) {
			if err := os.Truncate(p, int64(n)); err != nil {
				t.Fatal(err)
			}
		}},
		{"mem", mem, mem.snapshot, func(n int) {
			mem.mu.Lock()
			mem.data = mem.data[:n]
			mem.mu.Unlock()
		}},
	}
}

// splitSizes cuts total into pieces of 1, 2, ... max, 1, 2, ... bytes.
func splitSizes(total, max int) []int {
	var s []int
	for k := 1; total > 0; k = k%max + 1 {
		k := min(k, total)
		s = append(s, k)
		total -= k
	}
	return s
}

func splitBytes(b []byte, sizes []int) [][]byte {
	var out [][]byte
	for _, k := range sizes {
		out, b = append(out, b[:k]), b[k:]
	}
	return out
}

// doIndirect is do for an indirect chain (any number of segments).
func (e *env) doIndirect(out [][]byte, in []int) virtiotest.UsedElem {
	e.t.Helper()
	want := e.d.UsedIdx() + 1
	e.d.AddIndirectChain(out, in)
	e.d.Kick()
	if !e.d.WaitUsedIdx(want, 5*time.Second) {
		e.t.Fatalf("request not completed (errors %v)", e.intr.Errors())
	}
	return e.d.Collect()[0]
}

// TestVectoredSplitBuffers moves 8 sectors through chains of more segments
// than IOV_MAX, odd sizes, and a header split in two, on both paths: what
// lands on the disk and in the guest's buffers is exactly the data.
func TestVectoredSplitBuffers(t *testing.T) {
	const n = 8 * SectorSize
	for _, td := range testDisks(t, false) {
		t.Run(td.name, func(t *testing.T) {
			e := newEnvBackend(t, td.be, Config{}, virtio.Bit(virtio.FeatureRingIndirectDesc))
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(i*7 + i>>9)
			}
			sizes := splitSizes(n, 3) // 2048 segments
			if len(sizes) <= iovMax {
				t.Fatalf("only %d segments", len(sizes))
			}
			h := header(TypeOut, 5)
			out := append([][]byte{h[:3], h[3:]}, splitBytes(data, sizes)...)
			if u := e.doIndirect(out, []int{1}); status(u) != StatusOK || u.Len != 1 {
				t.Fatalf("OUT: status %d len %d", status(u), u.Len)
			}
			disk := td.data()
			if !bytes.Equal(disk[5*SectorSize:5*SectorSize+n], data) {
				t.Fatal("disk does not hold the written data")
			}
			if !bytes.Equal(disk[:5*SectorSize], pattern(5)) || !bytes.Equal(disk[13*SectorSize:], pattern(diskSectors)[13*SectorSize:]) {
				t.Fatal("write touched sectors outside the request")
			}
			// Read back across 1500 writable segments, the status
			// byte sharing the last one.
			in := splitSizes(n, 5)
			in[len(in)-1]++
			u := e.doIndirect([][]byte{header(TypeIn, 5)}, in)
			got := bytes.Join(u.In, nil)
			if status(u) != StatusOK || u.Len != n+1 || !bytes.Equal(got[:n], data) {
				t.Fatalf("IN: status %d len %d, data equal %v", status(u), u.Len, bytes.Equal(got[:n], data))
			}
		})
	}
}

// TestShortReadZeroFills: the image shrank under the running device (its
// capacity is fixed at New); a read across the new end gets what is there
// and zeroes for the rest, status OK, and never writes the status byte's
// neighbours beyond the chain.
func TestShortReadZeroFills(t *testing.T) {
	for _, td := range testDisks(t, false) {
		t.Run(td.name, func(t *testing.T) {
			e := newEnvBackend(t, td.be, Config{}, 0)
			td.shrink(61*SectorSize + 100)
			head := e.d.BuildChain([][]byte{header(TypeIn, 60)}, []int{SectorSize + 7, 2*SectorSize - 7, 1})
			fillWritable(t, e.d, head, 0xee)
			want := e.d.UsedIdx() + 1
			e.d.PublishAvail(head)
			e.d.Kick()
			if !e.d.WaitUsedIdx(want, 5*time.Second) {
				t.Fatal("no completion")
			}
			u := e.d.Collect()[0]
			got := bytes.Join(u.In, nil)
			exp := append(bytes.Repeat([]byte{60}, SectorSize), bytes.Repeat([]byte{61}, 100)...)
			exp = append(exp, make([]byte, 3*SectorSize-len(exp))...)
			if status(u) != StatusOK || u.Len != 3*SectorSize+1 || !bytes.Equal(got[:3*SectorSize], exp) {
				t.Fatalf("status %d len %d, data equal %v", status(u), u.Len, bytes.Equal(got[:3*SectorSize], exp))
			}
		})
	}
}

// fillWritable writes v over the writable buffers of the direct chain at
// head, so a test sees which bytes the device wrote.
func fillWritable(t *testing.T, d *virtiotest.Driver, head uint16, v byte) {
	t.Helper()
	for i := head; ; {
		b, err := d.Mem.Slice(d.DescAddr()+16*uint64(i), 16)
		if err != nil {
			t.Fatal(err)
		}
		addr, n := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint32(b[8:])
		flags, next := binary.LittleEndian.Uint16(b[12:]), binary.LittleEndian.Uint16(b[14:])
		if flags&virtio.DescFlagWrite != 0 {
			for j := range uint64(n) {
				d.RAM[addr+j] = v
			}
		}
		if flags&virtio.DescFlagNext == 0 {
			return
		}
		i = next
	}
}

// TestVectoredStatuses: the checks that come before any I/O hold on the
// vectored path too, and a failing backend leaves the guest's buffers and
// the disk as they were.
func TestVectoredStatuses(t *testing.T) {
	tests := []struct {
		name   string
		roFile bool
		cfg    Config
		out    [][]byte
		in     []int
		status byte
	}{
		{"read at capacity", false, Config{}, [][]byte{header(TypeIn, diskSectors)}, []int{SectorSize, 1}, StatusIOErr},
		{"read straddling end", false, Config{}, [][]byte{header(TypeIn, diskSectors-1)}, []int{SectorSize, SectorSize, 1}, StatusIOErr},
		{"read partial sector", false, Config{}, [][]byte{header(TypeIn, 0)}, []int{SectorSize + 1, 1}, StatusIOErr},
		{"write past end", false, Config{}, [][]byte{header(TypeOut, diskSectors-1), make([]byte, 2*SectorSize)}, []int{1}, StatusIOErr},
		{"write partial sector", false, Config{}, [][]byte{header(TypeOut, 0), make([]byte, 513)}, []int{1}, StatusIOErr},
		{"write read-only device", true, Config{ReadOnly: true}, [][]byte{header(TypeOut, 1), make([]byte, SectorSize)}, []int{1}, StatusIOErr},
		{"write read-only file", true, Config{}, [][]byte{header(TypeOut, 1), make([]byte, SectorSize)}, []int{1}, StatusIOErr},
		{"read read-only file", true, Config{ReadOnly: true}, [][]byte{header(TypeIn, 3)}, []int{SectorSize, 1}, StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			td := testDisks(t, tt.roFile)[0] // the File: vectored path
			e := newEnvBackend(t, td.be, tt.cfg, 0)
			head := e.d.BuildChain(tt.out, tt.in)
			fillWritable(t, e.d, head, 0xee)
			want := e.d.UsedIdx() + 1
			e.d.PublishAvail(head)
			e.d.Kick()
			if !e.d.WaitUsedIdx(want, 5*time.Second) {
				t.Fatal("no completion")
			}
			u := e.d.Collect()[0]
			if status(u) != tt.status {
				t.Fatalf("status %d, want %d", status(u), tt.status)
			}
			data := bytes.Join(u.In, nil)
			data = data[:len(data)-1]
			wantData := bytes.Repeat([]byte{0xee}, len(data))
			if tt.status == StatusOK {
				wantData = bytes.Repeat([]byte{3}, len(data))
			}
			if !bytes.Equal(data, wantData) {
				t.Fatalf("guest buffer %x...", data[:min(8, len(data))])
			}
			if !bytes.Equal(td.data(), pattern(diskSectors)) {
				t.Fatal("disk changed")
			}
		})
	}
}

func TestDataBufs(t *testing.T) {
	mem, err := guestmem.New(guestmem.Region{GPA: 0x1000, Host: make([]byte, 0x1000)})
	if err != nil {
		t.Fatal(err)
	}
	segs := []virtio.Segment{
		{Addr: 0x1000, Len: 10}, {Addr: 0x1100, Len: 0}, {Addr: 0x1200, Len: 20},
		{Addr: 0x1400, Len: 5, Write: true}, {Addr: 0x1500, Len: 7, Write: true},
	}
	tests := []struct {
		name     string
		segs     []virtio.Segment
		writable bool
		skip, n  uint64
		want     [][2]uint64 // guest address, length
		err      bool
	}{
		{"readable after header", segs, false, 16, 14, [][2]uint64{{0x1206, 14}}, false},
		{"readable all", segs, false, 0, 30, [][2]uint64{{0x1000, 10}, {0x1200, 20}}, false},
		{"writable minus status", segs, true, 0, 11, [][2]uint64{{0x1400, 5}, {0x1500, 6}}, false},
		{"nothing", segs, true, 0, 0, nil, false},
		{"longer than the part", segs, true, 0, 13, nil, true},
		{"skip past the part", segs, false, 31, 1, nil, true},
		{"segment outside RAM", []virtio.Segment{{Addr: 0x1ff0, Len: 0x20}}, false, 0, 0x20, nil, true},
	}
	for _, tt := range tests {
		bufs, err := dataBufs(mem, tt.segs, tt.writable, tt.skip, tt.n, nil)
		if (err != nil) != tt.err {
			t.Errorf("%s: err %v", tt.name, err)
			continue
		}
		if tt.err {
			continue
		}
		if len(bufs) != len(tt.want) {
			t.Errorf("%s: %d buffers, want %d", tt.name, len(bufs), len(tt.want))
			continue
		}
		for i, b := range bufs {
			w, _ := mem.Slice(tt.want[i][0], tt.want[i][1])
			if len(b) != len(w) || &b[0] != &w[0] {
				t.Errorf("%s: buffer %d wrong", tt.name, i)
			}
		}
	}
}

// FuzzDataBufs: whatever segments the guest described (each inside RAM, as
// Pop guarantees), the data buffers are exactly bytes [skip, skip+n) of the
// chosen part of the chain, in order, or dataBufs fails because the part is
// shorter.
func FuzzDataBufs(f *testing.F) {
	f.Add([]byte{0, 16, 0, 64, 16, 1}, true, uint64(0), uint64(15))
	f.Add([]byte{0, 16, 0, 200, 40, 1, 8, 8, 0}, false, uint64(16), uint64(8))
	f.Fuzz(func(t *testing.T, shape []byte, writable bool, skip, n uint64) {
		ram := make([]byte, 4096)
		for i := range ram {
			ram[i] = byte(i*31 ^ i>>8)
		}
		mem, _ := guestmem.New(guestmem.Region{GPA: 0, Host: ram})
		var segs []virtio.Segment
		var part []byte // the chosen part, as the guest laid it out
		for i := 0; i+2 < len(shape); i += 3 {
			addr, ln := uint64(shape[i])*16, uint64(shape[i+1])
			s := virtio.Segment{Addr: addr, Len: uint32(ln), Write: shape[i+2]&1 == 1}
			if addr+ln > uint64(len(ram)) {
				continue
			}
			if s.Write == writable {
				part = append(part, ram[addr:addr+ln]...)
			}
			segs = append(segs, s)
		}
		bufs, err := dataBufs(mem, segs, writable, skip, n, nil)
		// Nothing to move always works, wherever skip points.
		fits := n == 0 || skip <= uint64(len(part)) && n <= uint64(len(part))-skip
		if err != nil {
			if fits {
				t.Fatalf("dataBufs failed on a chain that holds the range: %v", err)
			}
			return
		}
		if !fits {
			t.Fatalf("dataBufs accepted [%d, +%d) of a %d-byte part", skip, n, len(part))
		}
		got := bytes.Join(bufs, nil)
		if n > 0 && !bytes.Equal(got, part[skip:skip+n]) || n == 0 && len(got) != 0 {
			t.Fatalf("buffers do not match bytes [%d, +%d) of the part", skip, n)
		}
		for _, b := range bufs {
			if len(b) == 0 {
				t.Fatal("empty buffer handed out")
			}
		}
	})
}

func TestFileVectored(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.img")
	if err := os.WriteFile(p, pattern(16), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(p, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// 3000 buffers (some empty) across IOV_MAX, written then read back.
	data := make([]byte, 6000)
	for i := range data {
		data[i] = byte(i % 251)
	}
	sizes := splitSizes(len(data), 3)
	sizes = append(sizes[:10], append([]int{0, 0}, sizes[10:]...)...)
	if n, err := f.WriteAtv(splitBytes(data, sizes), 100); n != len(data) || err != nil {
		t.Fatalf("WriteAtv = %d, %v", n, err)
	}
	back := make([]byte, len(data))
	if n, err := f.ReadAtv(splitBytes(back, sizes), 100); n != len(data) || err != nil || !bytes.Equal(back, data) {
		t.Fatalf("ReadAtv = %d, %v, equal %v", n, err, bytes.Equal(back, data))
	}
	// A read past the end returns what is there and io.EOF.
	tail := make([]byte, 1000)
	n, err := f.ReadAtv([][]byte{tail[:300], tail[300:]}, 16*SectorSize-400)
	if n != 400 || err != io.EOF || !bytes.Equal(tail[:400], pattern(16)[16*SectorSize-400:]) {
		t.Fatalf("ReadAtv at the end = %d, %v", n, err)
	}
	f.Close()
	ro, err := OpenFile(p, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.WriteAtv([][]byte{make([]byte, 10)}, 0); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("WriteAtv on read-only = %v", err)
	}
}

// TestVectoredResumes drives vectored with a kernel that moves a few bytes
// per call and is interrupted every other call: every byte still arrives
// in order, no call gets more than IOV_MAX buffers, the caller's list is
// left alone, and a call that moves nothing ends it.
func TestVectoredResumes(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "v")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src := make([]byte, 5000)
	for i := range src {
		src[i] = byte(i % 253)
	}
	calls := 0
	op := func(fd int, bufs [][]byte, off int64) (int, error) {
		calls++
		if len(bufs) > iovMax {
			t.Fatalf("%d buffers in one call", len(bufs))
		}
		if calls%2 == 0 {
			return 0, unix.EINTR
		}
		n := 0
		for _, b := range bufs {
			k := copy(b, src[off+int64(n):min(off+int64(n)+int64(len(b)), off+13)])
			n += k
			if k < len(b) {
				break
			}
		}
		return n, nil
	}
	dst := make([]byte, len(src)-7)
	bufs := splitBytes(dst, splitSizes(len(dst), 4))
	saved := append([][]byte(nil), bufs...)
	n, err := vectored(f, bufs, 7, op, io.EOF)
	if n != len(dst) || err != nil || !bytes.Equal(dst, src[7:]) {
		t.Fatalf("vectored = %d, %v, equal %v", n, err, bytes.Equal(dst, src[7:]))
	}
	for i := range bufs {
		if len(bufs[i]) != len(saved[i]) || &bufs[i][0] != &saved[i][0] {
			t.Fatal("caller's buffer list modified")
		}
	}
	stop := func(fd int, bufs [][]byte, off int64) (int, error) { return 0, nil }
	if _, err := vectored(f, bufs, 0, stop, io.ErrShortWrite); err != io.ErrShortWrite {
		t.Fatalf("no progress = %v", err)
	}
}

package kvm

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

var errorsIs = errors.Is

// fakeRun builds a kvm_run mapping of 3 pages like the kernel's (run page,
// PIO data page, coalesced MMIO ring).
func fakeRun(reason uint32, fill func(u []byte)) []byte {
	run := make([]byte, 3*4096)
	binary.LittleEndian.PutUint32(run[runExitReason:], reason)
	if fill != nil {
		fill(run[runUnion:])
	}
	return run
}

func ioFill(dir, size uint8, port uint16, count uint32, off uint64) func([]byte) {
	return func(u []byte) {
		u[0], u[1] = dir, size
		binary.LittleEndian.PutUint16(u[2:], port)
		binary.LittleEndian.PutUint32(u[4:], count)
		binary.LittleEndian.PutUint64(u[8:], off)
	}
}

func TestParseExitIO(t *testing.T) {
	run := fakeRun(exitIO, ioFill(1, 2, 0x3f8, 3, 4096))
	copy(run[4096:], []byte{1, 2, 3, 4, 5, 6, 7})
	e, err := parseExit(run)
	if err != nil {
		t.Fatal(err)
	}
	io, ok := e.(ExitIO)
	if !ok {
		t.Fatalf("got %T", e)
	}
	if io.Port != 0x3f8 || io.Size != 2 || !io.Write || io.Count != 3 {
		t.Fatalf("got %+v", io)
	}
	if !reflect.DeepEqual(io.Data, []byte{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("data = %v", io.Data)
	}
	// IN: the caller's answer lands in the page.
	io.Data[0] = 0x99
	if run[4096] != 0x99 {
		t.Fatal("Data does not alias the kvm_run page")
	}
	if cap(io.Data) != 6 {
		t.Fatalf("cap(Data) = %d, appends could reach past the IO data", cap(io.Data))
	}
}

func TestParseExitErrors(t *testing.T) {
	tests := []struct {
		name string
		run  []byte
	}{
		{"short page", make([]byte, 100)},
		{"io size 3", fakeRun(exitIO, ioFill(0, 3, 0x10, 1, 4096))},
		{"io size 0", fakeRun(exitIO, ioFill(0, 0, 0x10, 1, 4096))},
		{"io offset beyond page", fakeRun(exitIO, ioFill(0, 1, 0x10, 1, 3*4096))},
		{"io count overruns", fakeRun(exitIO, ioFill(0, 4, 0x10, 1025, 8192))},
		{"io huge count", fakeRun(exitIO, ioFill(0, 4, 0x10, 0xffffffff, 4096))},
		{"io offset wraps", fakeRun(exitIO, ioFill(0, 4, 0x10, 2, ^uint64(3)))},
		{"mmio len 9", fakeRun(exitMMIO, func(u []byte) { binary.LittleEndian.PutUint32(u[16:], 9) })},
	}
	for _, tt := range tests {
		if e, err := parseExit(tt.run); !errors.Is(err, ErrBadRunPage) {
			t.Errorf("%s: got %v, %v; want ErrBadRunPage", tt.name, e, err)
		}
	}
}

func TestParseExitKinds(t *testing.T) {
	tests := []struct {
		name string
		run  []byte
		want Exit
	}{
		{"hlt", fakeRun(exitHLT, nil), ExitHLT{}},
		{"shutdown", fakeRun(exitShutdown, nil), ExitShutdown{}},
		{"intr", fakeRun(exitIntr, nil), ExitIntr{}},
		{"unknown 0", fakeRun(exitUnknown, nil), ExitUnknown{Reason: 0}},
		{"debug", fakeRun(4, nil), ExitUnknown{Reason: 4}},
		{"fail entry", fakeRun(exitFailEntry, func(u []byte) {
			binary.LittleEndian.PutUint64(u, 0x80000021)
			binary.LittleEndian.PutUint32(u[8:], 1)
		}), ExitFailEntry{Reason: 0x80000021, CPU: 1}},
		{"internal error", fakeRun(exitInternalError, func(u []byte) {
			binary.LittleEndian.PutUint32(u, InternalErrorEmulation)
			binary.LittleEndian.PutUint32(u[4:], 2)
			binary.LittleEndian.PutUint64(u[8:], 0xdead)
			binary.LittleEndian.PutUint64(u[16:], 0xbeef)
		}), ExitInternalError{Suberror: 1, Data: []uint64{0xdead, 0xbeef}}},
		{"internal error ndata clamped", fakeRun(exitInternalError, func(u []byte) {
			binary.LittleEndian.PutUint32(u[4:], 1000)
		}), ExitInternalError{Data: make([]uint64, 16)}},
		{"system event", fakeRun(exitSystemEvent, func(u []byte) {
			binary.LittleEndian.PutUint32(u, SystemEventReset)
			binary.LittleEndian.PutUint32(u[4:], 1)
			binary.LittleEndian.PutUint64(u[8:], 7)
		}), ExitSystemEvent{Type: SystemEventReset, Data: []uint64{7}}},
	}
	for _, tt := range tests {
		got, err := parseExit(tt.run)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, got, tt.want)
		}
	}
}

func TestParseExitMMIO(t *testing.T) {
	run := fakeRun(exitMMIO, func(u []byte) {
		binary.LittleEndian.PutUint64(u, 0xfee00300)
		copy(u[8:], []byte{0xa, 0xb, 0xc, 0xd})
		binary.LittleEndian.PutUint32(u[16:], 4)
		u[20] = 1
	})
	e, err := parseExit(run)
	if err != nil {
		t.Fatal(err)
	}
	m := e.(ExitMMIO)
	if m.Addr != 0xfee00300 || !m.Write || !reflect.DeepEqual(m.Data, []byte{0xa, 0xb, 0xc, 0xd}) {
		t.Fatalf("got %+v", m)
	}
}

// FuzzParseExit: whatever the run page says, parsing never panics and the
// returned data slices stay inside the page.
func FuzzParseExit(f *testing.F) {
	f.Add(uint32(exitIO), []byte{0, 1, 0x10, 0, 1, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0})
	f.Add(uint32(exitMMIO), []byte{0, 0, 0xe0, 0xfe, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 0, 0, 0, 1})
	f.Add(uint32(exitInternalError), []byte{1, 0, 0, 0, 0xff, 0, 0, 0})
	f.Add(uint32(exitSystemEvent), []byte{2, 0, 0, 0, 17, 0, 0, 0})
	f.Fuzz(func(t *testing.T, reason uint32, union []byte) {
		run := make([]byte, 3*4096)
		binary.LittleEndian.PutUint32(run[runExitReason:], reason)
		copy(run[runUnion:minRunSize], union)
		e, err := parseExit(run)
		if err != nil {
			return
		}
		switch x := e.(type) {
		case ExitIO:
			if len(x.Data) != int(x.Size)*int(x.Count) {
				t.Fatalf("io data len %d for size %d count %d", len(x.Data), x.Size, x.Count)
			}
		case ExitMMIO:
			if len(x.Data) > 8 {
				t.Fatalf("mmio data len %d", len(x.Data))
			}
		case ExitInternalError:
			if len(x.Data) > 16 {
				t.Fatalf("internal data len %d", len(x.Data))
			}
		case ExitSystemEvent:
			if len(x.Data) > 16 {
				t.Fatalf("system event data len %d", len(x.Data))
			}
		}
	})
}

package kvm

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrBadRunPage is returned when the kvm_run page describes an exit whose
// data lies outside the page (it should never happen; it guards the slices
// Run hands out).
var ErrBadRunPage = errors.New("kvm: malformed kvm_run exit")

// Exit is why KVM_RUN returned: one of the Exit* types below. Exits are
// values, not errors; only a failing ioctl is an error.
type Exit interface {
	// Kind is the exit's kind, for counting.
	Kind() ExitKind
}

// ExitKind names the kind of an Exit: a small index (for per-kind counter
// arrays, NumExitKinds of them) with a stable name (String: govm stat and
// /metrics label exits with it). An IN and an OUT are kinds of their own.
type ExitKind uint8

// Exit kinds.
const (
	KindIOIn ExitKind = iota
	KindIOOut
	KindMMIO
	KindIntr
	KindHLT
	KindShutdown
	KindSystemEvent
	KindInternalError
	KindFailEntry
	KindUnknown
	NumExitKinds
)

var exitKindNames = [NumExitKinds]string{"io_in", "io_out", "mmio", "intr", "hlt", "shutdown",
	"system_event", "internal_error", "fail_entry", "unknown"}

func (k ExitKind) String() string {
	if k < NumExitKinds {
		return exitKindNames[k]
	}
	return fmt.Sprintf("exit_kind_%d", uint8(k))
}

// ExitIO is a port I/O instruction (KVM_EXIT_IO). Data holds Size*Count
// bytes inside the kvm_run mapping: for an OUT (Write) it is what the guest
// wrote; for an IN the caller fills it before the next Run. Data is only
// valid until the next Run.
type ExitIO struct {
	Port  uint16
	Size  uint8 // 1, 2 or 4 bytes per element
	Write bool  // OUT
	Count uint32
	Data  []byte
}

// ExitMMIO is an access to guest-physical memory no slot backs
// (KVM_EXIT_MMIO). For a read the caller fills Data (1-8 bytes, inside the
// kvm_run page) before the next Run.
type ExitMMIO struct {
	Addr  uint64
	Data  []byte
	Write bool
}

// ExitHLT is a HLT executed without the in-kernel irqchip (KVM_EXIT_HLT).
type ExitHLT struct{}

// ExitShutdown is a triple fault (KVM_EXIT_SHUTDOWN): the guest is dead or
// asked for a reset the hard way.
type ExitShutdown struct{}

// ExitIntr means KVM_RUN returned because of a signal or immediate_exit
// (EINTR / KVM_EXIT_INTR), usually after VCPU.Interrupt.
type ExitIntr struct{}

// ExitInternalError is KVM_EXIT_INTERNAL_ERROR; Suberror 1
// (InternalErrorEmulation) means the instruction emulator could not run
// the instruction at RIP.
type ExitInternalError struct {
	Suberror uint32
	Data     []uint64
}

// ExitFailEntry is KVM_EXIT_FAIL_ENTRY: the hardware refused the guest
// state.
type ExitFailEntry struct {
	Reason uint64
	CPU    uint32
}

// ExitSystemEvent is KVM_EXIT_SYSTEM_EVENT (shutdown, reset, crash...).
type ExitSystemEvent struct {
	Type uint32
	Data []uint64
}

// ExitUnknown is any exit reason govm does not handle.
type ExitUnknown struct {
	Reason uint32
}

// Kind is KindIOOut for an OUT, KindIOIn for an IN.
func (e ExitIO) Kind() ExitKind {
	if e.Write {
		return KindIOOut
	}
	return KindIOIn
}
func (ExitMMIO) Kind() ExitKind          { return KindMMIO }
func (ExitHLT) Kind() ExitKind           { return KindHLT }
func (ExitShutdown) Kind() ExitKind      { return KindShutdown }
func (ExitIntr) Kind() ExitKind          { return KindIntr }
func (ExitInternalError) Kind() ExitKind { return KindInternalError }
func (ExitFailEntry) Kind() ExitKind     { return KindFailEntry }
func (ExitSystemEvent) Kind() ExitKind   { return KindSystemEvent }
func (ExitUnknown) Kind() ExitKind       { return KindUnknown }

// Exit reasons (KVM_EXIT_*).
const (
	exitUnknown       = 0
	exitIO            = 2
	exitHLT           = 5
	exitMMIO          = 6
	exitShutdown      = 8
	exitFailEntry     = 9
	exitIntr          = 10
	exitInternalError = 17
	exitSystemEvent   = 24
)

// InternalErrorEmulation is ExitInternalError.Suberror for an instruction
// KVM could not emulate (KVM_INTERNAL_ERROR_EMULATION).
const InternalErrorEmulation = 1

// System event types (KVM_SYSTEM_EVENT_*).
const (
	SystemEventShutdown = 1
	SystemEventReset    = 2
	SystemEventCrash    = 3
)

// Offsets into struct kvm_run (include/uapi/linux/kvm.h); the exit union
// starts at 32.
const (
	runExitReason = 8
	runUnion      = 32
	// minRunSize covers struct kvm_run up to and including the exit union
	// (sizeof(struct kvm_run) is 2352).
	minRunSize  = 2352
	maxDataRegs = 16 // internal.data[16], system_event.data[16]
)

// parseExit decodes the exit described by a kvm_run page. Slices in the
// result alias run (IO and MMIO data) so the caller can answer reads in
// place. Every offset and length the page claims is bounds-checked.
func parseExit(run []byte) (Exit, error) {
	if len(run) < minRunSize {
		return nil, fmt.Errorf("%w: page is %d bytes", ErrBadRunPage, len(run))
	}
	le := binary.LittleEndian
	u := run[runUnion:]
	reason := le.Uint32(run[runExitReason:])
	switch reason {
	case exitIO:
		// struct { __u8 direction, size; __u16 port; __u32 count; __u64 data_offset; }
		e := ExitIO{Write: u[0] == 1, Size: u[1], Port: le.Uint16(u[2:]), Count: le.Uint32(u[4:])}
		off := le.Uint64(u[8:])
		if e.Size != 1 && e.Size != 2 && e.Size != 4 {
			return nil, fmt.Errorf("%w: io size %d", ErrBadRunPage, e.Size)
		}
		n := uint64(e.Size) * uint64(e.Count)
		if off > uint64(len(run)) || n > uint64(len(run))-off {
			return nil, fmt.Errorf("%w: io data [%#x, +%#x) outside %d-byte page", ErrBadRunPage, off, n, len(run))
		}
		e.Data = run[off : off+n : off+n]
		return e, nil
	case exitMMIO:
		// struct { __u64 phys_addr; __u8 data[8]; __u32 len; __u8 is_write; }
		n := le.Uint32(u[16:])
		if n > 8 {
			return nil, fmt.Errorf("%w: mmio len %d", ErrBadRunPage, n)
		}
		return ExitMMIO{Addr: le.Uint64(u), Data: u[8 : 8+n : 8+n], Write: u[20] != 0}, nil
	case exitHLT:
		return ExitHLT{}, nil
	case exitShutdown:
		return ExitShutdown{}, nil
	case exitIntr:
		return ExitIntr{}, nil
	case exitFailEntry:
		return ExitFailEntry{Reason: le.Uint64(u), CPU: le.Uint32(u[8:])}, nil
	case exitInternalError:
		return ExitInternalError{Suberror: le.Uint32(u), Data: regs64(u[4:])}, nil
	case exitSystemEvent:
		return ExitSystemEvent{Type: le.Uint32(u), Data: regs64(u[4:])}, nil
	}
	return ExitUnknown{Reason: reason}, nil
}

// regs64 decodes {__u32 ndata; __u64 data[16]} (ndata at b[0], data at
// b[4:], 8-aligned in kvm_run), clamping ndata to the array. It copies, so
// the result outlives the next Run.
func regs64(b []byte) []uint64 {
	n := binary.LittleEndian.Uint32(b)
	if n > maxDataRegs {
		n = maxDataRegs
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[4+8*i:])
	}
	return out
}

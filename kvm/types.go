package kvm

import (
	"encoding/binary"
	"fmt"
)

// Regs is the vCPU's general-purpose register file.
// It mirrors struct kvm_regs (arch/x86/include/uapi/asm/kvm.h).
type Regs struct {
	RAX, RBX, RCX, RDX uint64
	RSI, RDI, RSP, RBP uint64
	R8, R9, R10, R11   uint64
	R12, R13, R14, R15 uint64
	RIP, RFLAGS        uint64
}

// Segment is a segment register as KVM sees it: the hidden descriptor
// cache, not a selector to look up. It mirrors struct kvm_segment.
type Segment struct {
	Base     uint64
	Limit    uint32
	Selector uint16
	Type     uint8
	Present  uint8
	DPL      uint8
	DB       uint8
	S        uint8
	L        uint8
	G        uint8
	AVL      uint8
	Unusable uint8
	_        uint8
}

// DTable is a descriptor-table register (GDTR/IDTR).
// It mirrors struct kvm_dtable.
type DTable struct {
	Base  uint64
	Limit uint16
	_     [3]uint16
}

// Sregs holds the segment, control and descriptor-table registers.
// It mirrors struct kvm_sregs.
type Sregs struct {
	CS, DS, ES, FS, GS, SS Segment
	TR, LDT                Segment
	GDT, IDT               DTable
	CR0, CR2, CR3, CR4     uint64
	CR8                    uint64
	EFER                   uint64
	APICBase               uint64
	// InterruptBitmap has a bit set for a pending external interrupt
	// (only without the in-kernel irqchip).
	InterruptBitmap [4]uint64
}

// FPU is the x87/SSE state. It mirrors struct kvm_fpu.
type FPU struct {
	FPR        [8][16]uint8
	FCW        uint16
	FSW        uint16
	FTWX       uint8
	_          uint8
	LastOpcode uint16
	LastIP     uint64
	LastDP     uint64
	XMM        [16][16]uint8
	MXCSR      uint32
	_          uint32
}

// MSREntry is one model-specific register. Its memory layout matches struct
// kvm_msr_entry (index, 4 bytes of padding, data), but it is converted
// explicitly (msrEntry) before it reaches the kernel.
type MSREntry struct {
	Index uint32
	Data  uint64
}

// CPUIDEntry is one CPUID leaf/subleaf (the useful part of struct
// kvm_cpuid_entry2; see cpuidEntry2 for the kernel layout).
type CPUIDEntry struct {
	Function, Index, Flags uint32
	EAX, EBX, ECX, EDX     uint32
}

// CPUIDFlagSignificantIndex (KVM_CPUID_FLAG_SIGNIFCANT_INDEX) marks an entry
// whose Index (ECX input) selects a subleaf.
const CPUIDFlagSignificantIndex = 1

// LAPICState is the local APIC register page (the APIC's 4 KiB MMIO page
// folded to 1 KiB: register at MMIO offset o lives at byte o). It mirrors
// struct kvm_lapic_state.
type LAPICState [1024]byte

// Reg returns the 32-bit APIC register at byte offset off (e.g. 0x350 for
// LVT LINT0). off must be 4-byte aligned and below 0x400.
func (l *LAPICState) Reg(off int) uint32 {
	return binary.LittleEndian.Uint32(l[off : off+4])
}

// SetReg stores the 32-bit APIC register at byte offset off.
func (l *LAPICState) SetReg(off int, v uint32) {
	binary.LittleEndian.PutUint32(l[off:off+4], v)
}

// MP states for GetMPState/SetMPState (KVM_MP_STATE_*).
const (
	MPStateRunnable      = 0
	MPStateUninitialized = 1
	MPStateInitReceived  = 2
	MPStateHalted        = 3
	MPStateSIPIReceived  = 4
)

// VCPUEvents is the vCPU's pending and in-flight events: an exception
// being delivered, an interrupt, NMI and SMI state. It mirrors struct
// kvm_vcpu_events (KVM_GET_VCPU_EVENTS / KVM_SET_VCPU_EVENTS).
type VCPUEvents struct {
	Exception struct {
		Injected     uint8
		Nr           uint8
		HasErrorCode uint8
		Pending      uint8
		ErrorCode    uint32
	}
	Interrupt struct {
		Injected, Nr, Soft, Shadow uint8
	}
	NMI struct {
		Injected, Pending, Masked, Pad uint8
	}
	SIPIVector uint32
	Flags      uint32
	SMI        struct {
		SMM, Pending, SMMInsideNMI, LatchedInit uint8
	}
	TripleFault struct {
		Pending uint8
	}
	Reserved            [26]uint8
	ExceptionHasPayload uint8
	ExceptionPayload    uint64
}

// cpuidEntry2 mirrors struct kvm_cpuid_entry2. It has no implicit padding,
// so encoding/binary writes exactly the kernel's bytes.
type cpuidEntry2 struct {
	Function, Index, Flags uint32
	EAX, EBX, ECX, EDX     uint32
	Padding                [3]uint32
}

// cpuid2Header mirrors the fixed part of struct kvm_cpuid2.
type cpuid2Header struct {
	Nent, Padding uint32
}

// msrEntry mirrors struct kvm_msr_entry.
type msrEntry struct {
	Index, Reserved uint32
	Data            uint64
}

// msrsHeader mirrors the fixed part of struct kvm_msrs.
type msrsHeader struct {
	NMSRs, Pad uint32
}

// userspaceMemoryRegion mirrors struct kvm_userspace_memory_region.
type userspaceMemoryRegion struct {
	Slot, Flags   uint32
	GuestPhysAddr uint64
	MemorySize    uint64
	UserspaceAddr uint64
}

// irqLevel mirrors struct kvm_irq_level.
type irqLevel struct {
	IRQ, Level uint32
}

// pitConfig mirrors struct kvm_pit_config.
type pitConfig struct {
	Flags uint32
	Pad   [15]uint32
}

// ioeventfd mirrors struct kvm_ioeventfd.
type ioeventfd struct {
	Datamatch uint64
	Addr      uint64
	Len       uint32
	FD        int32
	Flags     uint32
	Pad       [36]uint8
}

// kvm_ioeventfd flags.
const (
	ioeventfdFlagDatamatch = 1 << 0
	ioeventfdFlagPIO       = 1 << 1
	ioeventfdFlagDeassign  = 1 << 2
)

// encodeCPUID2 builds a struct kvm_cpuid2 with room for n entries, filled
// from entries (len(entries) <= n).
func encodeCPUID2(entries []CPUIDEntry, n int) []byte {
	buf := make([]byte, binary.Size(cpuid2Header{})+n*binary.Size(cpuidEntry2{}))
	binary.LittleEndian.PutUint32(buf, uint32(n))
	off := binary.Size(cpuid2Header{})
	for _, e := range entries {
		k := cpuidEntry2{Function: e.Function, Index: e.Index, Flags: e.Flags,
			EAX: e.EAX, EBX: e.EBX, ECX: e.ECX, EDX: e.EDX}
		b, _ := binary.Append(nil, binary.LittleEndian, &k)
		off += copy(buf[off:], b)
	}
	return buf
}

// decodeCPUID2 parses a struct kvm_cpuid2 filled by the kernel.
func decodeCPUID2(buf []byte) ([]CPUIDEntry, error) {
	var h cpuid2Header
	if _, err := binary.Decode(buf, binary.LittleEndian, &h); err != nil {
		return nil, fmt.Errorf("kvm: short kvm_cpuid2: %w", err)
	}
	esz := binary.Size(cpuidEntry2{})
	body := buf[binary.Size(h):]
	if uint64(h.Nent)*uint64(esz) > uint64(len(body)) {
		return nil, fmt.Errorf("kvm: kvm_cpuid2 claims %d entries in %d bytes", h.Nent, len(body))
	}
	out := make([]CPUIDEntry, h.Nent)
	for i := range out {
		var k cpuidEntry2
		if _, err := binary.Decode(body[i*esz:], binary.LittleEndian, &k); err != nil {
			return nil, err
		}
		out[i] = CPUIDEntry{Function: k.Function, Index: k.Index, Flags: k.Flags,
			EAX: k.EAX, EBX: k.EBX, ECX: k.ECX, EDX: k.EDX}
	}
	return out, nil
}

// encodeMSRs builds a struct kvm_msrs holding msrs.
func encodeMSRs(msrs []MSREntry) []byte {
	buf := make([]byte, 0, binary.Size(msrsHeader{})+len(msrs)*binary.Size(msrEntry{}))
	buf, _ = binary.Append(buf, binary.LittleEndian, msrsHeader{NMSRs: uint32(len(msrs))})
	for _, m := range msrs {
		buf, _ = binary.Append(buf, binary.LittleEndian, msrEntry{Index: m.Index, Data: m.Data})
	}
	return buf
}

// decodeMSRs parses the entries of a struct kvm_msrs (n of them).
func decodeMSRs(buf []byte, n int) []MSREntry {
	off := binary.Size(msrsHeader{})
	esz := binary.Size(msrEntry{})
	out := make([]MSREntry, 0, n)
	for i := 0; i < n && off+esz <= len(buf); i++ {
		var k msrEntry
		_, _ = binary.Decode(buf[off:], binary.LittleEndian, &k)
		out = append(out, MSREntry{Index: k.Index, Data: k.Data})
		off += esz
	}
	return out
}

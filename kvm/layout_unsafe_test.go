package kvm

import (
	"encoding/binary"
	"testing"
	"unsafe"
)

// The expected numbers below come from compiling a C program against this
// host's <linux/kvm.h> (sizeof/offsetof and the ioctl macros), and agree
// with the values documented in Documentation/virt/kvm/api.rst.

func TestIoctlNumbers(t *testing.T) {
	tests := []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"KVM_GET_API_VERSION", kvmGetAPIVersion, 0xae00},
		{"KVM_CREATE_VM", kvmCreateVM, 0xae01},
		{"KVM_CHECK_EXTENSION", kvmCheckExtension, 0xae03},
		{"KVM_GET_VCPU_MMAP_SIZE", kvmGetVCPUMmapSize, 0xae04},
		{"KVM_GET_SUPPORTED_CPUID", kvmGetSupportedCPUID, 0xc008ae05},
		{"KVM_CREATE_VCPU", kvmCreateVCPU, 0xae41},
		{"KVM_SET_USER_MEMORY_REGION", kvmSetUserMemoryRegion, 0x4020ae46},
		{"KVM_SET_TSS_ADDR", kvmSetTSSAddr, 0xae47},
		{"KVM_SET_IDENTITY_MAP_ADDR", kvmSetIdentityMapAddr, 0x4008ae48},
		{"KVM_CREATE_IRQCHIP", kvmCreateIRQChip, 0xae60},
		{"KVM_IRQ_LINE", kvmIRQLine, 0x4008ae61},
		{"KVM_CREATE_PIT2", kvmCreatePIT2, 0x4040ae77},
		{"KVM_IOEVENTFD", kvmIOEventFD, 0x4040ae79},
		{"KVM_RUN", kvmRun, 0xae80},
		{"KVM_GET_REGS", kvmGetRegs, 0x8090ae81},
		{"KVM_SET_REGS", kvmSetRegs, 0x4090ae82},
		{"KVM_GET_SREGS", kvmGetSregs, 0x8138ae83},
		{"KVM_SET_SREGS", kvmSetSregs, 0x4138ae84},
		{"KVM_GET_MSRS", kvmGetMSRs, 0xc008ae88},
		{"KVM_SET_MSRS", kvmSetMSRs, 0x4008ae89},
		{"KVM_GET_FPU", kvmGetFPU, 0x81a0ae8c},
		{"KVM_SET_FPU", kvmSetFPU, 0x41a0ae8d},
		{"KVM_GET_LAPIC", kvmGetLAPIC, 0x8400ae8e},
		{"KVM_SET_LAPIC", kvmSetLAPIC, 0x4400ae8f},
		{"KVM_SET_CPUID2", kvmSetCPUID2, 0x4008ae90},
		{"KVM_GET_MP_STATE", kvmGetMPState, 0x8004ae98},
		{"KVM_SET_MP_STATE", kvmSetMPState, 0x4004ae99},
		{"KVM_GET_VCPU_EVENTS", kvmGetVCPUEvents, 0x8040ae9f},
		{"KVM_SET_VCPU_EVENTS", kvmSetVCPUEvents, 0x4040aea0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %#x, want %#x", tt.name, tt.got, tt.want)
		}
	}
}

func TestStructSizes(t *testing.T) {
	tests := []struct {
		name      string
		got, want uintptr
	}{
		{"kvm_regs", unsafe.Sizeof(Regs{}), sizeofRegs},
		{"kvm_regs literal", sizeofRegs, 144},
		{"kvm_sregs", unsafe.Sizeof(Sregs{}), 312},
		{"kvm_sregs const", sizeofSregs, 312},
		{"kvm_segment", unsafe.Sizeof(Segment{}), 24},
		{"kvm_dtable", unsafe.Sizeof(DTable{}), 16},
		{"kvm_fpu", unsafe.Sizeof(FPU{}), 416},
		{"kvm_fpu const", sizeofFPU, 416},
		{"kvm_lapic_state", unsafe.Sizeof(LAPICState{}), 1024},
		{"kvm_msr_entry (MSREntry)", unsafe.Sizeof(MSREntry{}), 16},
		{"kvm_msr_entry", unsafe.Sizeof(msrEntry{}), 16},
		{"kvm_msr_entry binary", uintptr(binary.Size(msrEntry{})), 16},
		{"kvm_msrs", unsafe.Sizeof(msrsHeader{}), sizeofMSRs},
		{"kvm_cpuid_entry2", unsafe.Sizeof(cpuidEntry2{}), 40},
		{"kvm_cpuid_entry2 binary", uintptr(binary.Size(cpuidEntry2{})), 40},
		{"kvm_cpuid2", unsafe.Sizeof(cpuid2Header{}), sizeofCPUID2},
		{"kvm_userspace_memory_region", unsafe.Sizeof(userspaceMemoryRegion{}), 32},
		{"kvm_irq_level", unsafe.Sizeof(irqLevel{}), 8},
		{"kvm_pit_config", unsafe.Sizeof(pitConfig{}), 64},
		{"kvm_ioeventfd", unsafe.Sizeof(ioeventfd{}), 64},
		{"kvm_vcpu_events", unsafe.Sizeof(VCPUEvents{}), sizeofVCPUEvents},
		{"kvm_vcpu_events literal", sizeofVCPUEvents, 64},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("sizeof %s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

func TestStructOffsets(t *testing.T) {
	var s Sregs
	var seg Segment
	var dt DTable
	var f FPU
	var r Regs
	var m MSREntry
	var k cpuidEntry2
	var u userspaceMemoryRegion
	var e ioeventfd
	var ev VCPUEvents
	tests := []struct {
		name      string
		got, want uintptr
	}{
		{"kvm_vcpu_events.interrupt", unsafe.Offsetof(ev.Interrupt), 8},
		{"kvm_vcpu_events.nmi", unsafe.Offsetof(ev.NMI), 12},
		{"kvm_vcpu_events.sipi_vector", unsafe.Offsetof(ev.SIPIVector), 16},
		{"kvm_vcpu_events.flags", unsafe.Offsetof(ev.Flags), 20},
		{"kvm_vcpu_events.smi", unsafe.Offsetof(ev.SMI), 24},
		{"kvm_vcpu_events.triple_fault", unsafe.Offsetof(ev.TripleFault), 28},
		{"kvm_vcpu_events.exception_has_payload", unsafe.Offsetof(ev.ExceptionHasPayload), 55},
		{"kvm_vcpu_events.exception_payload", unsafe.Offsetof(ev.ExceptionPayload), 56},
		{"kvm_regs.r15", unsafe.Offsetof(r.R15), 120},
		{"kvm_regs.rip", unsafe.Offsetof(r.RIP), 128},
		{"kvm_regs.rflags", unsafe.Offsetof(r.RFLAGS), 136},
		{"kvm_sregs.cs", unsafe.Offsetof(s.CS), 0},
		{"kvm_sregs.tr", unsafe.Offsetof(s.TR), 144},
		{"kvm_sregs.gdt", unsafe.Offsetof(s.GDT), 192},
		{"kvm_sregs.idt", unsafe.Offsetof(s.IDT), 208},
		{"kvm_sregs.cr0", unsafe.Offsetof(s.CR0), 224},
		{"kvm_sregs.cr8", unsafe.Offsetof(s.CR8), 256},
		{"kvm_sregs.efer", unsafe.Offsetof(s.EFER), 264},
		{"kvm_sregs.apic_base", unsafe.Offsetof(s.APICBase), 272},
		{"kvm_sregs.interrupt_bitmap", unsafe.Offsetof(s.InterruptBitmap), 280},
		{"kvm_segment.limit", unsafe.Offsetof(seg.Limit), 8},
		{"kvm_segment.selector", unsafe.Offsetof(seg.Selector), 12},
		{"kvm_segment.type", unsafe.Offsetof(seg.Type), 14},
		{"kvm_segment.present", unsafe.Offsetof(seg.Present), 15},
		{"kvm_segment.dpl", unsafe.Offsetof(seg.DPL), 16},
		{"kvm_segment.db", unsafe.Offsetof(seg.DB), 17},
		{"kvm_segment.s", unsafe.Offsetof(seg.S), 18},
		{"kvm_segment.l", unsafe.Offsetof(seg.L), 19},
		{"kvm_segment.g", unsafe.Offsetof(seg.G), 20},
		{"kvm_segment.avl", unsafe.Offsetof(seg.AVL), 21},
		{"kvm_segment.unusable", unsafe.Offsetof(seg.Unusable), 22},
		{"kvm_dtable.limit", unsafe.Offsetof(dt.Limit), 8},
		{"kvm_fpu.fcw", unsafe.Offsetof(f.FCW), 128},
		{"kvm_fpu.fsw", unsafe.Offsetof(f.FSW), 130},
		{"kvm_fpu.ftwx", unsafe.Offsetof(f.FTWX), 132},
		{"kvm_fpu.last_opcode", unsafe.Offsetof(f.LastOpcode), 134},
		{"kvm_fpu.last_ip", unsafe.Offsetof(f.LastIP), 136},
		{"kvm_fpu.last_dp", unsafe.Offsetof(f.LastDP), 144},
		{"kvm_fpu.xmm", unsafe.Offsetof(f.XMM), 152},
		{"kvm_fpu.mxcsr", unsafe.Offsetof(f.MXCSR), 408},
		{"kvm_msr_entry.data", unsafe.Offsetof(m.Data), 8},
		{"kvm_cpuid_entry2.index", unsafe.Offsetof(k.Index), 4},
		{"kvm_cpuid_entry2.flags", unsafe.Offsetof(k.Flags), 8},
		{"kvm_cpuid_entry2.eax", unsafe.Offsetof(k.EAX), 12},
		{"kvm_cpuid_entry2.edx", unsafe.Offsetof(k.EDX), 24},
		{"kvm_cpuid_entry2.padding", unsafe.Offsetof(k.Padding), 28},
		{"kvm_userspace_memory_region.flags", unsafe.Offsetof(u.Flags), 4},
		{"kvm_userspace_memory_region.guest_phys_addr", unsafe.Offsetof(u.GuestPhysAddr), 8},
		{"kvm_userspace_memory_region.memory_size", unsafe.Offsetof(u.MemorySize), 16},
		{"kvm_userspace_memory_region.userspace_addr", unsafe.Offsetof(u.UserspaceAddr), 24},
		{"kvm_ioeventfd.addr", unsafe.Offsetof(e.Addr), 8},
		{"kvm_ioeventfd.len", unsafe.Offsetof(e.Len), 16},
		{"kvm_ioeventfd.fd", unsafe.Offsetof(e.FD), 20},
		{"kvm_ioeventfd.flags", unsafe.Offsetof(e.Flags), 24},
		{"kvm_ioeventfd.pad", unsafe.Offsetof(e.Pad), 28},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("offsetof %s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

func TestImmediateExitBit(t *testing.T) {
	// A uint64-backed buffer stands in for the page-aligned kvm_run page.
	words := make([]uint64, 4)
	run := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 32)
	run[0] = 0xAA // request_interrupt_window must survive
	setImmediateExit(run)
	if run[1] != 1 || !immediateExit(run) {
		t.Fatalf("after set: byte 1 = %d, want 1", run[1])
	}
	clearImmediateExit(run)
	if run[1] != 0 || immediateExit(run) {
		t.Fatalf("after clear: byte 1 = %d, want 0", run[1])
	}
	if run[0] != 0xAA {
		t.Fatalf("request_interrupt_window clobbered: %#x", run[0])
	}
}

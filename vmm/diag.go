package vmm

import (
	"bytes"
	"fmt"

	"github.com/govm/govm/kvm"
)

// describeInternalError turns KVM_EXIT_INTERNAL_ERROR into one line: what,
// where (RIP and instruction bytes) and, on an emulation-only host, the
// instruction KVM's emulator lacks when we recognise it.
func (m *Machine) describeInternalError(v *kvm.VCPU, e kvm.ExitInternalError) string {
	msg := fmt.Sprintf("KVM_EXIT_INTERNAL_ERROR on vCPU %d: suberror %d", v.ID(), e.Suberror)
	insn, rip := m.instructionBytes(v)
	msg += fmt.Sprintf(", rip %#x, bytes % x", rip, insn)
	if e.Suberror == kvm.InternalErrorEmulation && m.emulationOnly {
		if name := unemulated(insn); name != "" {
			msg += fmt.Sprintf(": the guest executed %s, which this host's KVM instruction emulator does not implement (the host has no VT-x/AMD-V; see docs/boot.md)", name)
		} else {
			msg += ": KVM's instruction emulator could not run this instruction (the host has no VT-x/AMD-V)"
		}
	}
	return msg
}

func (m *Machine) ripSuffix(v *kvm.VCPU) string {
	insn, rip := m.instructionBytes(v)
	return fmt.Sprintf(", rip %#x, bytes % x", rip, insn)
}

// instructionBytes returns up to 15 bytes at the vCPU's RIP, translated
// through the guest's page tables when paging is on.
func (m *Machine) instructionBytes(v *kvm.VCPU) ([]byte, uint64) {
	regs, err := v.GetRegs()
	if err != nil {
		return nil, 0
	}
	sregs, err := v.GetSregs()
	if err != nil {
		return nil, regs.RIP
	}
	lin := sregs.CS.Base + regs.RIP
	gpa, ok := lin, true
	if sregs.CR0&(1<<31) != 0 {
		gpa, ok = walkPageTables(m.ram.mem, sregs.CR3, sregs.CR4, sregs.EFER, lin)
	}
	if !ok {
		return nil, regs.RIP
	}
	out := make([]byte, 0, 15)
	for i := uint64(0); i < 15; i++ {
		b, err := m.ram.mem.Slice(gpa+i, 1)
		if err != nil {
			break
		}
		out = append(out, b[0])
	}
	return out, regs.RIP
}

// unemulated names instructions known to be missing from KVM's emulator
// (HOST.md): cmpxchg16b, the xsave family, ldmxcsr/stmxcsr (Debian's
// kernel dies on ldmxcsr minutes into an emulated boot), int3.
func unemulated(insn []byte) string {
	// Skip legacy prefixes and REX.
	i := 0
	for i < len(insn) && bytes.IndexByte([]byte{0xf0, 0xf2, 0xf3, 0x2e, 0x36, 0x3e, 0x26, 0x64, 0x65, 0x66, 0x67}, insn[i]) >= 0 {
		i++
	}
	rexW := false
	if i < len(insn) && insn[i]&0xf0 == 0x40 {
		rexW = insn[i]&8 != 0
		i++
	}
	rest := insn[i:]
	switch {
	case len(rest) >= 1 && rest[0] == 0xcc:
		return "int3"
	case len(rest) >= 3 && rest[0] == 0x0f && rest[1] == 0xc7 && (rest[2]>>3)&7 == 1:
		if rexW {
			return "cmpxchg16b"
		}
		return "cmpxchg8b"
	case len(rest) >= 3 && rest[0] == 0x0f && rest[1] == 0xae && rest[2] < 0xc0:
		switch (rest[2] >> 3) & 7 {
		case 2:
			return "ldmxcsr"
		case 3:
			return "stmxcsr"
		case 4:
			return "xsave"
		case 5:
			return "xrstor"
		case 6:
			return "xsaveopt"
		}
	case len(rest) >= 3 && rest[0] == 0x0f && rest[1] == 0xc7 && (rest[2]>>3)&7 == 3:
		return "xrstors"
	case len(rest) >= 3 && rest[0] == 0x0f && rest[1] == 0xc7 && (rest[2]>>3)&7 == 5:
		return "xsaves"
	}
	return ""
}

package vmm

import (
	"fmt"

	"github.com/govm/govm/kvm"
)

// Two instructions that KVM's instruction emulator lacks have effects a
// VMM can supply itself. On an emulation-only host (HOST.md) every guest
// kernel instruction runs in that emulator, and Linux executes both on
// ordinary paths: int3 in alternative_instructions()'s self-test (and in
// every text_poke_bp), fwait in fpu__drop() on each exec.
const (
	opInt3  = 0xcc // INT3: raise #BP as a trap (saved RIP after it)
	opFwait = 0x9b // FWAIT: wait for pending x87 exceptions
	vecBP   = 3    // #BP, breakpoint
)

// emulationFixup carries out an instruction KVM's emulator failed on, when
// the VMM can: int3 becomes the #BP exception the guest expects, with RIP
// past the int3 as a trap leaves it; fwait is stepped over. Skipping fwait
// drops an x87 exception it would have raised (#MF); where Linux executes
// it, in fpu__drop, its exception table ignores that #MF anyway. It reports
// whether it handled the instruction; any other failure stays an internal
// error for the caller to describe.
//
// At CPL0 KVM queues a #UD before reporting the failure; KVM_SET_REGS
// clears pending exceptions, which is why SetRegs comes before the
// injection (and is what makes the fwait skip clean).
func (m *Machine) emulationFixup(v *kvm.VCPU, e kvm.ExitInternalError) (bool, error) {
	if e.Suberror != kvm.InternalErrorEmulation || !m.emulationOnly {
		return false, nil
	}
	insn, _ := m.instructionBytes(v)
	if len(insn) == 0 || (insn[0] != opInt3 && insn[0] != opFwait) {
		return false, nil
	}
	regs, err := v.GetRegs()
	if err != nil {
		return false, err
	}
	regs.RIP++
	if err := v.SetRegs(regs); err != nil {
		return false, err
	}
	if insn[0] == opFwait {
		m.fixups[v.ID()].fwait.Add(1)
		return true, nil
	}
	if err := v.InjectException(vecBP); err != nil {
		return false, fmt.Errorf("int3 at %#x: %w", regs.RIP-1, err)
	}
	m.fixups[v.ID()].int3.Add(1)
	return true, nil
}

package kvm

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrMSRRejected is returned when KVM_SET_MSRS sets fewer MSRs than asked.
var ErrMSRRejected = errors.New("kvm: MSR rejected")

// VCPU is one virtual CPU. Run must be called from a single goroutine that
// has called runtime.LockOSThread; every other method except Interrupt
// belongs to that goroutine too (or to set-up before Run).
type VCPU struct {
	fd  int
	id  int
	pid int
	run []byte // the kvm_run mapping

	// tid is the OS thread inside KVM_RUN (0 when none), for Interrupt.
	tid atomic.Int32
	// mu keeps Close from unmapping run under a concurrent Interrupt.
	mu     sync.RWMutex
	closed bool
}

// ID returns the vCPU id (its initial APIC ID).
func (v *VCPU) ID() int { return v.id }

// Close unmaps kvm_run and closes the vCPU. Run must have returned.
func (v *VCPU) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return ErrClosed
	}
	v.closed = true
	err := unix.Munmap(v.run)
	if cerr := unix.Close(v.fd); err == nil {
		err = cerr
	}
	return err
}

// Run enters the guest (KVM_RUN) until the next exit. The caller must have
// locked its OS thread (runtime.LockOSThread) so Interrupt's signal reaches
// the right thread. A signal or Interrupt yields ExitIntr{}, not an error.
func (v *VCPU) Run() (Exit, error) {
	// Publish the TID before entering: Interrupt sets immediate_exit
	// first and reads tid second; Run stores tid first and KVM_RUN reads
	// immediate_exit second. Both are sequentially consistent, so either
	// Interrupt sees the TID and signals, or KVM_RUN sees immediate_exit.
	v.tid.Store(int32(unix.Gettid()))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(v.fd), kvmRun, 0)
	v.tid.Store(0)
	if errno == unix.EAGAIN {
		// An application processor waiting for its start-up IPI got
		// INIT or SIPI (kvm_arch_vcpu_ioctl_run): nothing to handle,
		// run it again. An Interrupt request, if any, still stands.
		return ExitIntr{}, nil
	}
	if errno == unix.EINTR {
		// The interrupt request is consumed: clear it so the next Run
		// enters the guest.
		clearImmediateExit(v.run)
		return ExitIntr{}, nil
	}
	if errno != 0 {
		return nil, fmt.Errorf("KVM_RUN vcpu %d: %w", v.id, errno)
	}
	return parseExit(v.run)
}

// Interrupt makes the current or next Run return ExitIntr. It is safe from
// any goroutine: it sets kvm_run.immediate_exit and, if the vCPU thread is
// inside KVM_RUN, sends that thread SIGURG (which the Go runtime already
// handles and ignores when it did not ask for preemption).
func (v *VCPU) Interrupt() {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return
	}
	setImmediateExit(v.run)
	if tid := v.tid.Load(); tid != 0 {
		// ESRCH can only mean the thread is gone, and then it is not
		// in KVM_RUN either.
		_ = unix.Tgkill(v.pid, int(tid), unix.SIGURG)
	}
}

// GetRegs returns the general-purpose registers (KVM_GET_REGS).
func (v *VCPU) GetRegs() (*Regs, error) {
	var r Regs
	if _, err := ioctlPtr(v.fd, kvmGetRegs, &r); err != nil {
		return nil, fmt.Errorf("KVM_GET_REGS vcpu %d: %w", v.id, err)
	}
	return &r, nil
}

// SetRegs sets the general-purpose registers (KVM_SET_REGS).
func (v *VCPU) SetRegs(r *Regs) error {
	if _, err := ioctlPtr(v.fd, kvmSetRegs, r); err != nil {
		return fmt.Errorf("KVM_SET_REGS vcpu %d: %w", v.id, err)
	}
	return nil
}

// GetSregs returns the special registers (KVM_GET_SREGS).
func (v *VCPU) GetSregs() (*Sregs, error) {
	var s Sregs
	if _, err := ioctlPtr(v.fd, kvmGetSregs, &s); err != nil {
		return nil, fmt.Errorf("KVM_GET_SREGS vcpu %d: %w", v.id, err)
	}
	return &s, nil
}

// SetSregs sets the special registers (KVM_SET_SREGS).
func (v *VCPU) SetSregs(s *Sregs) error {
	if _, err := ioctlPtr(v.fd, kvmSetSregs, s); err != nil {
		return fmt.Errorf("KVM_SET_SREGS vcpu %d: %w", v.id, err)
	}
	return nil
}

// GetFPU returns the x87/SSE state (KVM_GET_FPU).
func (v *VCPU) GetFPU() (*FPU, error) {
	var f FPU
	if _, err := ioctlPtr(v.fd, kvmGetFPU, &f); err != nil {
		return nil, fmt.Errorf("KVM_GET_FPU vcpu %d: %w", v.id, err)
	}
	return &f, nil
}

// SetFPU sets the x87/SSE state (KVM_SET_FPU).
func (v *VCPU) SetFPU(f *FPU) error {
	if _, err := ioctlPtr(v.fd, kvmSetFPU, f); err != nil {
		return fmt.Errorf("KVM_SET_FPU vcpu %d: %w", v.id, err)
	}
	return nil
}

// SetMSRs writes MSRs (KVM_SET_MSRS). KVM stops at the first MSR it
// rejects; that one is named in the error, which wraps ErrMSRRejected.
func (v *VCPU) SetMSRs(msrs []MSREntry) error {
	if len(msrs) == 0 {
		return nil
	}
	n, err := ioctlBytes(v.fd, kvmSetMSRs, encodeMSRs(msrs))
	if err != nil {
		return fmt.Errorf("KVM_SET_MSRS vcpu %d: %w", v.id, err)
	}
	if int(n) < len(msrs) {
		return fmt.Errorf("KVM_SET_MSRS vcpu %d: set %d of %d, MSR %#x: %w", v.id, n, len(msrs), msrs[n].Index, ErrMSRRejected)
	}
	return nil
}

// GetMSRs reads the MSRs with the given indices (KVM_GET_MSRS). It returns
// the ones KVM could read, in order, stopping at the first it could not.
func (v *VCPU) GetMSRs(indices []uint32) ([]MSREntry, error) {
	msrs := make([]MSREntry, len(indices))
	for i, idx := range indices {
		msrs[i].Index = idx
	}
	buf := encodeMSRs(msrs)
	n, err := ioctlBytes(v.fd, kvmGetMSRs, buf)
	if err != nil {
		return nil, fmt.Errorf("KVM_GET_MSRS vcpu %d: %w", v.id, err)
	}
	return decodeMSRs(buf, int(n)), nil
}

// SetCPUID sets the CPUID table the guest sees (KVM_SET_CPUID2).
func (v *VCPU) SetCPUID(entries []CPUIDEntry) error {
	if _, err := ioctlBytes(v.fd, kvmSetCPUID2, encodeCPUID2(entries, len(entries))); err != nil {
		return fmt.Errorf("KVM_SET_CPUID2 vcpu %d (%d entries): %w", v.id, len(entries), err)
	}
	return nil
}

// GetLAPIC returns the local APIC registers (KVM_GET_LAPIC; needs the
// in-kernel irqchip).
func (v *VCPU) GetLAPIC() (*LAPICState, error) {
	var l LAPICState
	if _, err := ioctlPtr(v.fd, kvmGetLAPIC, &l); err != nil {
		return nil, fmt.Errorf("KVM_GET_LAPIC vcpu %d: %w", v.id, err)
	}
	return &l, nil
}

// SetLAPIC sets the local APIC registers (KVM_SET_LAPIC).
func (v *VCPU) SetLAPIC(l *LAPICState) error {
	if _, err := ioctlPtr(v.fd, kvmSetLAPIC, l); err != nil {
		return fmt.Errorf("KVM_SET_LAPIC vcpu %d: %w", v.id, err)
	}
	return nil
}

// GetMPState returns the vCPU's multiprocessing state (MPState*).
func (v *VCPU) GetMPState() (uint32, error) {
	var s uint32
	if _, err := ioctlPtr(v.fd, kvmGetMPState, &s); err != nil {
		return 0, fmt.Errorf("KVM_GET_MP_STATE vcpu %d: %w", v.id, err)
	}
	return s, nil
}

// SetMPState sets the vCPU's multiprocessing state (MPState*).
func (v *VCPU) SetMPState(state uint32) error {
	if _, err := ioctlPtr(v.fd, kvmSetMPState, &state); err != nil {
		return fmt.Errorf("KVM_SET_MP_STATE vcpu %d: %w", v.id, err)
	}
	return nil
}

// GetVCPUEvents returns the vCPU's pending and in-flight events
// (KVM_GET_VCPU_EVENTS).
func (v *VCPU) GetVCPUEvents() (*VCPUEvents, error) {
	var e VCPUEvents
	if _, err := ioctlPtr(v.fd, kvmGetVCPUEvents, &e); err != nil {
		return nil, fmt.Errorf("KVM_GET_VCPU_EVENTS vcpu %d: %w", v.id, err)
	}
	return &e, nil
}

// SetVCPUEvents sets the vCPU's events (KVM_SET_VCPU_EVENTS). Flags says
// which of the optional parts (NMI pending, SIPI vector, shadow, SMM) are
// valid; the exception is always taken.
func (v *VCPU) SetVCPUEvents(e *VCPUEvents) error {
	if _, err := ioctlPtr(v.fd, kvmSetVCPUEvents, e); err != nil {
		return fmt.Errorf("KVM_SET_VCPU_EVENTS vcpu %d: %w", v.id, err)
	}
	return nil
}

// InjectException makes the vCPU take exception vector nr (without an
// error code) when it next enters the guest: the exception frame holds
// RIP as it is now (for a trap such as #BP the caller moves RIP past the
// instruction first). That holds where KVM delivers the exception itself,
// as on an emulation-only host after its emulator failed; with VT-x or
// AMD-V a soft exception (#BP, #OF) is injected with an instruction
// length of its own, which moves the saved RIP again.
func (v *VCPU) InjectException(nr uint8) error {
	e, err := v.GetVCPUEvents()
	if err != nil {
		return err
	}
	e.Exception.Injected = 1
	e.Exception.Nr = nr
	e.Exception.HasErrorCode = 0
	e.Exception.Pending = 0
	e.Exception.ErrorCode = 0
	e.ExceptionHasPayload = 0
	e.Flags = 0
	return v.SetVCPUEvents(e)
}

package vmm

import (
	"fmt"
	"runtime"
	"time"

	"github.com/govm/govm/arch/x86/cpu"
	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/internal/yield"
	"github.com/govm/govm/kvm"
)

func (m *Machine) setupVCPUs() error {
	supported, err := m.sys.SupportedCPUID()
	if err != nil {
		return err
	}
	for id := 0; id < m.cfg.CPUs; id++ {
		v, err := m.vm.CreateVCPU(id)
		if err != nil {
			return err
		}
		m.vcpus = append(m.vcpus, v)
		if err := v.SetCPUID(cpu.FilterCPUID(supported, id, m.cfg.CPUs, m.emulationOnly)); err != nil {
			return err
		}
		if err := cpu.SetupLAPIC(v); err != nil {
			return err
		}
		// Application processors stay in wait-for-SIPI (the in-kernel
		// LAPIC's reset state) until the guest starts them.
		if id == 0 {
			if err := cpu.SetupLongMode(m.ram.mem, v, m.boot.entry, layout.ZeroPageAddr); err != nil {
				return err
			}
		}
	}
	return nil
}

// vcpuYieldEvery is how often a vCPU thread passes through Go's scheduler
// before KVM_RUN (internal/yield): otherwise sysmon takes the thread,
// which only ever leaves KVM_RUN for an exit and goes back, for one
// hogging its P, preempts it every 10 ms and polls every 20 us. Locked
// to its thread, the vCPU's yield is a hand-off through another thread,
// so it yields less often than a device goroutine. pingrig, medians of 3
// interleaved runs at load 8-12: non-vCPU context switches per frame 2.17
// without, 1.83 at 2 ms, 1.59 at 8 ms; CPU per frame 34, 31, 28 us; Go's
// sysmon thread ~30k -> ~3k context switches over 20000 pings.
const vcpuYieldEvery = 8 * time.Millisecond

// runVCPU is one vCPU's thread: KVM_RUN in a loop, dispatching exits.
func (m *Machine) runVCPU(v *kvm.VCPU) {
	// KVM requires every ioctl on a vCPU fd to come from one thread, and
	// Interrupt() signals that thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer nameThread(fmt.Sprintf("vcpu%d", v.ID()))()
	yp := yield.Point{Every: vcpuYieldEvery}
	m.startup.take() // just before this thread's first KVM_RUN
	for {
		select {
		case <-m.done:
			return
		default:
		}
		if ch := m.pauseCh.Load(); ch != nil {
			m.park(*ch)
			continue
		}
		yp.BeforeBlock()
		exit, err := v.Run()
		if err != nil {
			m.Stop(Result{Status: 1, Kind: ExitInternalError, Reason: err.Error()}) // "KVM_RUN vcpu N: ..."
			return
		}
		m.countExit(v.ID(), exit)
		if r, stop := m.handleExit(v, exit); stop {
			m.Stop(r)
			return
		}
	}
}

// handleExit services one VM exit; stop says the VM must end with r.
func (m *Machine) handleExit(v *kvm.VCPU, exit kvm.Exit) (r Result, stop bool) {
	switch e := exit.(type) {
	case kvm.ExitIO:
		m.handleIO(e)
	case kvm.ExitIntr:
		// A signal interrupted KVM_RUN (Go preemption, Stop, Pause or
		// the halt check) or an AP was started; the loop checks done
		// and the pause, and the halt check may want an answer.
		m.answerHalt(v)
	case kvm.ExitMMIO:
		// No MMIO devices yet: reads see all ones, writes vanish, like
		// an unclaimed bus.
		if !e.Write {
			for i := range e.Data {
				e.Data[i] = 0xff
			}
		}
	case kvm.ExitHLT:
		// With the in-kernel irqchip KVM handles HLT itself; an HLT exit
		// means the vCPU halted with interrupts off: it can never wake.
		return Result{Status: 0, Kind: ExitHalt, Reason: fmt.Sprintf("vCPU %d halted with interrupts disabled", v.ID())}, true
	case kvm.ExitShutdown:
		return Result{Status: 0, Kind: ExitReset, Reason: fmt.Sprintf("guest reset (triple fault on vCPU %d)", v.ID())}, true
	case kvm.ExitSystemEvent:
		switch e.Type {
		case kvm.SystemEventReset:
			return Result{Status: 0, Kind: ExitReset, Reason: "guest requested reset"}, true
		case kvm.SystemEventShutdown:
			return Result{Status: 0, Kind: ExitPowerOff, Reason: "guest powered off"}, true
		default:
			return Result{Status: 1, Reason: fmt.Sprintf("guest system event %d (crash)", e.Type)}, true
		}
	case kvm.ExitInternalError:
		if ok, err := m.emulationFixup(v, e); err != nil {
			return Result{Status: 1, Reason: err.Error()}, true
		} else if ok {
			return Result{}, false
		}
		return Result{Status: 1, Reason: m.describeInternalError(v, e)}, true
	case kvm.ExitFailEntry:
		return Result{Status: 1, Reason: fmt.Sprintf("KVM_EXIT_FAIL_ENTRY on vCPU %d: hardware entry failure reason %#x%s",
			v.ID(), e.Reason, m.ripSuffix(v))}, true
	default:
		return Result{Status: 1, Reason: fmt.Sprintf("unexpected VM exit %#v on vCPU %d%s", exit, v.ID(), m.ripSuffix(v))}, true
	}
	return Result{}, false
}

func (m *Machine) handleIO(e kvm.ExitIO) {
	size := int(e.Size)
	if size == 0 {
		return
	}
	// String I/O (rep ins/outs) arrives as Count consecutive accesses.
	for i := 0; i+size <= len(e.Data); i += size {
		d := e.Data[i : i+size]
		if e.Write {
			m.bus.Write(e.Port, d)
		} else {
			m.bus.Read(e.Port, d)
		}
	}
}

package vmm

import (
	"sync/atomic"
	"time"

	"github.com/govm/govm/kvm"
)

// haltCheckEvery is how often govm looks for a guest that can never run
// again. A vCPU that has made no exit for that long is asked its state
// (one KVM_RUN interruption) and asked again each tick; an answer is read
// on the next tick, and two rounds in a row must find every vCPU dead, so
// a dead guest ends within four ticks.
const haltCheckEvery = 150 * time.Millisecond

// rflagsIF is RFLAGS.IF: maskable interrupts enabled.
const rflagsIF = 1 << 9

// haltProbe is one vCPU's side of the halt check: the watcher sets ask
// and interrupts KVM_RUN; the vCPU thread (the only one that may issue
// vCPU ioctls) looks and stores what it found.
type haltProbe struct {
	ask      atomic.Bool
	answered atomic.Bool
	dead     atomic.Bool
}

// watchHalt ends the VM, with status 0, once no vCPU can ever run again:
// each is halted with interrupts off and no NMI that could wake it, or is
// an application processor waiting for a start-up IPI (never started, or
// sent back by INIT). That is how Linux without ACPI powers off or halts
// (machine_halt: stop_this_cpu, cli; hlt), and with the in-kernel irqchip
// KVM keeps such a vCPU blocked in KVM_RUN without an exit: nothing else
// would end govm. The vCPUs answer one at a time, so a vCPU another one
// revived (an NMI, INIT and SIPI) between two answers could look dead:
// two rounds in a row must find them all dead. It returns the stop
// function.
func (m *Machine) watchHalt() func() {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(haltCheckEvery)
		defer t.Stop()
		last := make([]uint64, len(m.vcpus))
		deadRounds := 0
		for {
			select {
			case <-quit:
				return
			case <-m.done:
				return
			case <-t.C:
			}
			if m.pauseCh.Load() != nil {
				// A paused vCPU is parked, not halted: ask again after.
				for i := range m.halts {
					m.halts[i].answered.Store(false)
				}
				deadRounds = 0
				continue
			}
			allDead := true
			for i, v := range m.vcpus {
				h := &m.halts[i]
				n := m.activeExits(i)
				if n != last[i] {
					last[i] = n
					h.answered.Store(false)
					allDead = false
					continue
				}
				if !h.answered.Load() || !h.dead.Load() {
					allDead = false
				}
				if !h.ask.Load() {
					h.answered.Store(false)
					h.ask.Store(true)
					v.Interrupt()
				}
			}
			if !allDead {
				deadRounds = 0
				continue
			}
			// Every answer read here came from this round's question;
			// the loop above has asked the next round's.
			if deadRounds++; deadRounds == 2 {
				m.Stop(Result{Status: 0, Kind: ExitHalt,
					Reason: "the guest halted with interrupts off on every vCPU (Linux's poweroff or halt without ACPI)"})
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// activeExits counts vCPU id's exits other than interruptions of
// KVM_RUN, which the halt check itself causes.
func (m *Machine) activeExits(id int) uint64 {
	var n uint64
	for k := range m.exits[id] {
		if kvm.ExitKind(k) != kvm.KindIntr {
			n += m.exits[id][k].Load()
		}
	}
	return n
}

// answerHalt runs on v's thread after an interrupted KVM_RUN: if the
// watcher asked, it records whether v can ever run again.
func (m *Machine) answerHalt(v *kvm.VCPU) {
	h := &m.halts[v.ID()]
	if !h.ask.Swap(false) {
		return
	}
	h.dead.Store(vcpuDead(v))
	h.answered.Store(true)
}

// vcpuDead reports whether v is halted with interrupts off and no NMI to
// wake it (one pending while NMIs are blocked, as in Linux's NMI stop
// path, wakes nothing), or is an application processor waiting for a
// start-up IPI. Any error reads as alive: a wrong "dead" ends a running
// guest.
func vcpuDead(v *kvm.VCPU) bool {
	mp, err := v.GetMPState()
	if err != nil {
		return false
	}
	switch mp {
	case kvm.MPStateHalted:
	case kvm.MPStateUninitialized, kvm.MPStateInitReceived:
		return v.ID() != 0
	default:
		return false
	}
	regs, err := v.GetRegs()
	if err != nil || regs.RFLAGS&rflagsIF != 0 {
		return false
	}
	ev, err := v.GetVCPUEvents()
	if err != nil || ev.NMI.Injected != 0 || (ev.NMI.Pending != 0 && ev.NMI.Masked == 0) {
		return false
	}
	return true
}

package vmm

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/govm/govm/api"
	"github.com/govm/govm/kvm"
	"github.com/govm/govm/stall"
	"github.com/govm/govm/virtio"
)

// control is the Machine's control-plane state: pause, exit counters, and
// the start time. Kept apart so machine.go stays about assembly.
type control struct {
	started time.Time
	exits   [][kvm.NumExitKinds]atomic.Uint64 // per vCPU, by kvm.ExitKind
	// fixups counts, per vCPU, the instructions govm carried out for
	// KVM's emulator (emulate.go).
	fixups []struct{ int3, fwait atomic.Uint64 }
	// halts is each vCPU's side of the halt check (halt.go).
	halts []haltProbe

	// gate holds every virtio queue's Pop while paused.
	gate *virtio.Gate
	// pauseCh is non-nil while paused: parked vCPUs wait for it to
	// close. pauseMu serialises Pause and Resume.
	pauseMu sync.Mutex
	pauseCh atomic.Pointer[chan struct{}]
	parked  chan struct{} // one send per vCPU per pause

	wd atomic.Pointer[stall.Detector] // nil when off
}

func (m *Machine) initControl() {
	m.started = time.Now()
	m.gate = virtio.NewGate()
	m.exits = make([][kvm.NumExitKinds]atomic.Uint64, m.cfg.CPUs)
	m.fixups = make([]struct{ int3, fwait atomic.Uint64 }, m.cfg.CPUs)
	m.halts = make([]haltProbe, m.cfg.CPUs)
	m.parked = make(chan struct{}, m.cfg.CPUs)
}

func (m *Machine) countExit(id int, exit kvm.Exit) {
	if k := exit.Kind(); id >= 0 && id < len(m.exits) && k < kvm.NumExitKinds {
		m.exits[id][k].Add(1)
	}
}

// park holds a vCPU thread out of KVM_RUN until resume closes or the VM
// stops. Pause counts the parked threads.
func (m *Machine) park(resume chan struct{}) {
	m.parked <- struct{}{}
	select {
	case <-resume:
	case <-m.done:
	}
}

func (m *Machine) stopped() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// parkWait bounds how long Pause waits for the devices to park after the
// vCPUs: a request the host does not finish (a stalled disk) fails the
// pause rather than hanging it.
const parkWait = 5 * time.Second

// Pause stops the vCPUs and the devices. It returns once every vCPU is out
// of KVM_RUN and every device goroutine is parked (virtio.Gate.Settle): a
// request a device already took has finished its I/O, and nothing new is
// taken, published or written until Resume. A device that does not park
// within parkWait fails the pause, and the VM runs on.
func (m *Machine) Pause() error {
	m.pauseMu.Lock()
	defer m.pauseMu.Unlock()
	if m.stopped() {
		return api.ErrNotRunning
	}
	if m.pauseCh.Load() != nil {
		return api.ErrAlreadyPaused
	}
	ch := make(chan struct{})
	m.pauseCh.Store(&ch)
	m.gate.Close()
	for _, v := range m.vcpus {
		v.Interrupt()
	}
	for range m.vcpus {
		select {
		case <-m.parked:
		case <-m.done:
			return api.ErrNotRunning
		}
	}
	busy := m.gate.Settle(parkWait, m.done)
	if m.stopped() {
		return api.ErrNotRunning
	}
	if busy != nil {
		m.pauseCh.Store(nil)
		m.gate.Open()
		close(ch)
		return fmt.Errorf("%s did not park within %v: a request is still at work on the host (a disk whose I/O does not return?); the VM runs on",
			strings.Join(busy, ", "), parkWait)
	}
	return nil
}

// Resume lets the vCPUs and devices run again.
func (m *Machine) Resume() error {
	m.pauseMu.Lock()
	defer m.pauseMu.Unlock()
	if m.stopped() {
		return api.ErrNotRunning
	}
	ch := m.pauseCh.Load()
	if ch == nil {
		return api.ErrNotPaused
	}
	m.pauseCh.Store(nil)
	m.gate.Open()
	close(*ch)
	return nil
}

// RequestStop ends the VM as SIGTERM does (govm stop).
func (m *Machine) RequestStop() {
	m.Stop(Result{Status: 0, Reason: "stopped: govm stop"})
}

// State is running, paused or stopping.
func (m *Machine) State() string {
	switch {
	case m.stopped():
		return api.StateStopping
	case m.pauseCh.Load() != nil:
		return api.StatePaused
	}
	return api.StateRunning
}

// Info describes the VM for the API.
func (m *Machine) Info() api.Info {
	i := api.Info{Name: m.cfg.Name, PID: os.Getpid(), State: m.State(), CPUs: m.cfg.CPUs,
		MemBytes: m.cfg.MemSize, Started: m.started, Devices: []string{}}
	for _, s := range m.slots {
		i.Devices = append(i.Devices, s.what)
	}
	return i
}

// Stats is a snapshot of every queue's and vCPU's counters. Safe while the
// VM runs; after Close it has no queues (they would read freed RAM).
func (m *Machine) Stats() api.Stats {
	s := api.Stats{Name: m.cfg.Name, Time: time.Now(), Queues: []api.QueueStats{},
		Devices: []api.DeviceStats{}, VCPUs: []api.VCPUStats{}}
	m.closeMu.RLock()
	defer m.closeMu.RUnlock()
	if m.closed {
		return s
	}
	for _, sl := range m.slots {
		ts := sl.dev.Stats()
		s.Devices = append(s.Devices, api.DeviceStats{Device: sl.what, Status: ts.Status,
			ISRReads: ts.ISRReads, ISREmpty: ts.ISREmpty, ConfigInterrupts: ts.ConfigInterrupts,
			GuestErrors: ts.GuestErrors, ISR: ts.ISR, Line: ts.ISR != 0})
		for _, q := range ts.Queues {
			qs := api.QueueStats{Device: sl.what, Queue: q}
			if wd := m.wd.Load(); wd != nil {
				for _, e := range wd.Events(sl.what, q.Index) {
					qs.Watchdog = append(qs.Watchdog, api.WatchdogEvent{Kind: string(e.Kind), Count: e.Count, Last: e.Last})
				}
			}
			s.Queues = append(s.Queues, qs)
		}
	}
	for id := range m.exits {
		v := api.VCPUStats{ID: id, Exits: map[string]uint64{}}
		for k := range m.exits[id] {
			v.Exits[kvm.ExitKind(k).String()] = m.exits[id][k].Load()
		}
		s.VCPUs = append(s.VCPUs, v)
	}
	return s
}

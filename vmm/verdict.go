package vmm

import (
	"fmt"

	"github.com/govm/govm/hw/pvpanic"
	"github.com/govm/govm/pci"
)

// ExitKind classifies why a VM ended; the values are the exit_reason words
// of govm's JSON verdict (docs/result.md).
type ExitKind string

// The ways a VM ends that vmm sees. cmd/govm adds "timeout", and turns a
// panic seen on the console into "panic".
const (
	ExitReset         ExitKind = "reset"          // i8042 reset, triple fault, reset system event
	ExitPowerOff      ExitKind = "poweroff"       // shutdown system event
	ExitHalt          ExitKind = "halt"           // HLT with interrupts disabled: nothing can wake it
	ExitDebugExit     ExitKind = "debug-exit"     // the guest wrote the debug-exit port
	ExitPanic         ExitKind = "panic"          // the guest reported a panic through pvpanic
	ExitInternalError ExitKind = "internal-error" // KVM internal error, entry failure, crash event, host failure
	ExitSignal        ExitKind = "signal"         // SIGINT/SIGTERM, or Ctrl-A x on the console
	ExitTimeout       ExitKind = "timeout"        // --timeout expired (set by cmd/govm)
)

// addPVPanic plugs the pvpanic device into the next free slot. A panic
// event stops the VM at once: the guest has already printed its panic
// message (Linux calls the panic notifiers after it), and a kernel with
// panic=0 would otherwise spin forever.
func (m *Machine) addPVPanic() error {
	slot := uint8(len(m.slots) + 1)
	dev, err := pvpanic.New(func(ev uint8) {
		what := "panicked"
		if ev&pvpanic.CrashLoaded != 0 && ev&pvpanic.Panicked == 0 {
			// A crash kernel (kdump) runs next: it is still a panic,
			// but the dump is worth waiting for only with kdump set up,
			// which a smoke test does not have.
			what = "panicked, crash kernel loaded"
		}
		m.Stop(Result{Status: 1, Kind: ExitPanic, Reason: "guest kernel " + what + " (pvpanic event)"})
	})
	if err != nil {
		return fmt.Errorf("vmm: %w", err)
	}
	if err := m.pci.Add(slot, dev); err != nil {
		return fmt.Errorf("vmm: pvpanic: %w", err)
	}
	m.panic = dev
	return nil
}

// DeviceCounters is one device's counters for the JSON verdict.
type DeviceCounters struct {
	Name     string `json:"name"`
	Counters any    `json:"counters"`
}

// Counters returns every device's counters: the virtio transports (with
// their queues' ring indexes), the virtio-net queues, and pvpanic. Safe to
// call while the VM runs.
func (m *Machine) Counters() []DeviceCounters {
	var out []DeviceCounters
	for _, s := range m.slots {
		out = append(out, DeviceCounters{Name: s.what, Counters: s.dev.Stats()})
	}
	for i, n := range m.nets {
		out = append(out, DeviceCounters{Name: fmt.Sprintf("net %d queues", i), Counters: n.Stats()})
	}
	if m.panic != nil {
		out = append(out, DeviceCounters{Name: "pvpanic", Counters: m.panic.Counters()})
	}
	return out
}

var _ pci.Device = (*pvpanic.Device)(nil)

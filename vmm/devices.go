package vmm

import (
	"fmt"
	"time"

	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/arch/x86/mptable"
	"github.com/govm/govm/hw/cmos"
	"github.com/govm/govm/hw/debugexit"
	"github.com/govm/govm/hw/i8042"
	"github.com/govm/govm/hw/portsink"
	"github.com/govm/govm/hw/serial"
	"github.com/govm/govm/iobus"
	"github.com/govm/govm/irq"
)

// Legacy PC ports and ISA IRQs. (The debug-exit port is package
// debugexit's.)
const com1Port, com1IRQ = 0x3f8, 4

// setupDevices puts the platform devices on the port bus and writes the MP
// table that describes the machine to the guest.
func (m *Machine) setupDevices() error {
	m.uart = serial.New(irq.KVMLine{Chip: m.vm, GSI: com1IRQ}, m.cfg.Stdout)
	regs := []portDev{
		{com1Port, 8, m.uart, "COM1"},
		{0x2f8, 8, serial.NewInert(), "COM2"},
		{0x3e8, 8, serial.NewInert(), "COM3"},
		{0x2e8, 8, serial.NewInert(), "COM4"},
		{0x70, 2, cmos.New(m.cfg.MemSize, time.Now), "CMOS"},
		{0x80, 1, portsink.New(0xff), "POST port"},
	}
	kbd := i8042.New(func() { m.Stop(Result{Status: 0, Kind: ExitReset, Reason: "guest reset via i8042"}) })
	regs = append(regs,
		portDev{0x60, 1, kbd.Data(), "i8042 data"},
		portDev{0x64, 1, kbd.Command(), "i8042 command"})
	if m.cfg.DebugExit {
		dx := debugexit.New(func(status int) {
			v := status >> 1 // debugexit gives (v<<1)|1
			if m.cfg.ExecStatus {
				status = v
			}
			m.Stop(Result{Status: status, Kind: ExitDebugExit, GuestCode: v,
				Reason: fmt.Sprintf("guest wrote debug-exit port, status %d", status)})
		})
		regs = append(regs, portDev{debugexit.Base, debugexit.NumPorts, dx, "debug-exit"})
	}
	for _, r := range regs {
		if err := m.bus.Register(r.base, r.n, r.dev); err != nil {
			return fmt.Errorf("vmm: %s: %w", r.what, err)
		}
	}
	if err := m.setupPCI(); err != nil {
		return err
	}
	if _, err := mptable.Write(m.ram.mem, layout.MPTableAddr, m.mptableConfig()); err != nil {
		return err
	}
	if m.cfg.Stdin != nil {
		var in serial.Inputter = m.uart
		if m.vcons != nil {
			in = m.vcons // --console virtio: the guest reads hvc0
		}
		restore, err := startConsole(m.cfg.Stdin, in, func() {
			m.Stop(Result{Status: 0, Kind: ExitSignal, Reason: "console: Ctrl-A x"})
		})
		if err != nil {
			return err
		}
		m.restoreConsole = restore
	}
	return nil
}

// portDev is one registration on the port bus.
type portDev struct {
	base, n uint16
	dev     iobus.Device
	what    string
}

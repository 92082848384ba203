package vmm

import (
	"fmt"

	"github.com/govm/govm/irq"
	"github.com/govm/govm/mptable"
	"github.com/govm/govm/pci"
	"github.com/govm/govm/tap"
	"github.com/govm/govm/virtio"
	virtionet "github.com/govm/govm/virtio/net"
	virtiopci "github.com/govm/govm/virtio/pci"
)

// DiskConfig is one --disk.
type DiskConfig struct {
	Path     string
	ReadOnly bool
	Serial   string
}

// pciSlot is a populated PCI slot, remembered for the MP table.
type pciSlot struct {
	slot, irq uint8
	dev       *virtiopci.Transport
	what      string
}

// setupPCI builds PCI bus 0 and plugs in the virtio devices: disks first,
// then network devices, one slot and one unshared INTx line each.
func (m *Machine) setupPCI() error {
	bus, err := pci.NewBus(&m.bus, m.logf)
	if err != nil {
		return fmt.Errorf("vmm: %w", err)
	}
	m.pci = bus
	for i, d := range m.cfg.Disks {
		what := fmt.Sprintf("disk %d (%s)", i, d.Path)
		dev, err := m.openDisk(d, what)
		if err != nil {
			return inputErrorf("--disk: %w", err)
		}
		if err := m.addVirtio(dev, what); err != nil {
			return err
		}
		m.disks = append(m.disks, dev)
	}
	for i, n := range m.cfg.Nets {
		if n.Mode == virtionet.NetNone {
			continue
		}
		t, err := tap.Open(tap.Config{Name: n.IfName, VMName: m.cfg.Name, HostIP: n.HostIP, VnetHdr: true})
		if err != nil {
			return inputErrorf("--net: %w", err)
		}
		mac := n.MAC
		if mac == nil {
			mac = virtionet.DefaultMAC(fmt.Sprintf("%s-%d", m.cfg.Name, i))
		}
		dev, err := virtionet.New(t, virtionet.Config{MAC: mac})
		if err != nil {
			t.Close()
			return fmt.Errorf("vmm: net %d: %w", i, err)
		}
		// Closers run in reverse: the device (reset with the transport)
		// stops using the tap before the tap closes, which deletes a tap
		// govm created.
		m.closers = append(m.closers, func() { t.Close() })
		if err := m.addVirtio(dev, fmt.Sprintf("net %d (%s)", i, t.Name())); err != nil {
			return err
		}
		m.nets = append(m.nets, dev)
	}
	return nil
}

// addVirtio wraps dev in the legacy virtio-PCI transport and plugs it into
// the next free slot, with its notify register on a KVM ioeventfd.
func (m *Machine) addVirtio(dev virtio.Device, what string) error {
	slot := uint8(len(m.slots) + 1)
	irqNum, ok := pci.SlotIRQ(slot)
	if !ok {
		return inputErrorf("too many devices: govm has %d PCI interrupt lines; %s does not fit", len(m.slots), what)
	}
	name := what
	logf := func(format string, args ...any) { m.logf(name+": "+format, args...) }
	pd, err := virtiopci.New(dev, m.ram.mem, irq.KVMLine{Chip: m.vm, GSI: uint32(irqNum)}, irqNum, logf)
	if err != nil {
		return fmt.Errorf("vmm: %s: %w", what, err)
	}
	if err := m.pci.Add(slot, pd); err != nil {
		return fmt.Errorf("vmm: %s: %w", what, err)
	}
	// Kicks through an ioeventfd skip the exit to user space; without it
	// (an old host) the port write on the vCPU thread still kicks.
	if err := pd.EnableIOEventFD(m.vm); err != nil {
		m.logf("%s: no ioeventfd (%v), kicks go through port exits", what, err)
	}
	m.closers = append(m.closers, func() {
		dev.Reset()
		pd.Close()
	})
	m.slots = append(m.slots, pciSlot{slot: slot, irq: irqNum, dev: pd, what: what})
	return nil
}

// mptableConfig describes the CPUs, the IOAPIC, the ISA interrupts and the
// PCI INTx routing govm drives: level-triggered lines that govm asserts by
// driving them high (KVM_IRQ_LINE 1), so the guest is told active-high, as
// QEMU's ACPI tables tell it for its PCI links.
func (m *Machine) mptableConfig() mptable.Config {
	cfg := mptable.Config{CPUs: m.cfg.CPUs, ISAIRQs: mptable.DefaultISAIRQs()}
	for _, s := range m.slots {
		cfg.PCI = append(cfg.PCI, mptable.PCIIRQ{Device: s.slot, Pin: 1, IRQ: s.irq, Level: true, ActiveLow: false})
	}
	return cfg
}

// DeviceStats returns one line per virtio device: transport counters and
// ring indexes, then the device's own counters where it keeps them. Safe to
// call while the VM runs (govm prints it on SIGUSR1 and with --stats).
func (m *Machine) DeviceStats() []string {
	var out []string
	for _, s := range m.slots {
		out = append(out, s.dev.Stats().String())
	}
	for i, d := range m.disks {
		out = append(out, fmt.Sprintf("disk %d: %v", i, d.Stats()))
	}
	for i, n := range m.nets {
		out = append(out, fmt.Sprintf("net %d: %v", i, n.Stats()))
	}
	return out
}

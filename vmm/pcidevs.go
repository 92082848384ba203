package vmm

import (
	"fmt"
	"io"

	"github.com/govm/govm/arch/x86/mptable"
	"github.com/govm/govm/internal/sharefs"
	"github.com/govm/govm/irq"
	"github.com/govm/govm/pci"
	"github.com/govm/govm/tap"
	"github.com/govm/govm/virtio"
	virtioconsole "github.com/govm/govm/virtio/console"
	virtionet "github.com/govm/govm/virtio/net"
	virtio9p "github.com/govm/govm/virtio/p9"
	virtiopci "github.com/govm/govm/virtio/pci"
	virtiorng "github.com/govm/govm/virtio/rng"
)

// ShareConfig is one --share.
type ShareConfig struct {
	Path     string
	Tag      string
	ReadOnly bool
}

// DiskConfig is one --disk.
type DiskConfig struct {
	Path     string
	ReadOnly bool
	Serial   string
	Withhold uint64 // feature bits not offered (FeatureSwitch)
}

// pciSlot is a populated PCI slot: a virtio device's transport and the
// backend the device does its I/O on, for the MP table, the stats and
// teardown.
type pciSlot struct {
	slot, irq uint8
	dev       *virtiopci.Transport
	backend   io.Closer // the disk image or the tap
	what      string
}

// close is the device's one closer. The order is the only safe one:
//  1. reset through the transport, under the lock that serialises the
//     driver's register accesses (a vCPU cannot activate it again behind
//     our back): when it returns the device's I/O goroutine has stopped
//     using guest RAM and the backend, the ISR is clear and the INTx line
//     is low;
//  2. close the transport: its ioeventfds are unregistered from KVM and
//     its doorbells' eventfds closed, so no kick arrives any more;
//  3. close the backend, which nothing uses any more (a disk's lock goes
//     with it; a tap govm created is deleted).
func (s *pciSlot) close(logf func(format string, args ...any)) {
	s.dev.Reset()
	if err := s.dev.Close(); err != nil {
		logf("%s: %v", s.what, err)
	}
	if err := s.backend.Close(); err != nil {
		logf("%s: %v", s.what, err)
	}
}

// setupPCI builds PCI bus 0 and plugs in the virtio devices: disks first,
// then network devices, shares, then the console and entropy devices, one slot and one unshared
// INTx line each.
func (m *Machine) setupPCI() error {
	bus, err := pci.NewBus(&m.bus, m.logf)
	if err != nil {
		return err
	}
	m.pci = bus
	for i, d := range m.cfg.Disks {
		what := fmt.Sprintf("disk %d (%s)", i, d.Path)
		dev, f, err := m.openDisk(d, what)
		if err != nil {
			return err
		}
		if err := m.addVirtio(dev, f, what); err != nil {
			return err
		}
		m.disks = append(m.disks, dev)
	}
	for i, n := range m.cfg.Nets {
		if n.Mode == NetNone {
			continue
		}
		t, err := tap.Open(tap.Config{Name: n.IfName, VMName: m.cfg.Name, NIC: i, HostIP: n.HostIP, VnetHdr: true})
		if err != nil {
			return inputErrorf("--net: %w", err)
		}
		mac := n.MAC
		if mac == (virtionet.MAC{}) {
			mac = DefaultMAC(fmt.Sprintf("%s-%d", m.cfg.Name, i))
		}
		dev, err := virtionet.New(tapBackend{t}, virtionet.Config{MAC: mac, PollMax: m.cfg.PollMax, Withhold: n.Withhold})
		if err != nil {
			t.Close()
			return fmt.Errorf("vmm: net %d: %w", i, err)
		}
		if err := m.addVirtio(dev, t, fmt.Sprintf("net %d (%s)", i, t.Name())); err != nil {
			return err
		}
		m.nets = append(m.nets, dev)
	}
	for _, sc := range m.cfg.Shares {
		what := fmt.Sprintf("share %s (%s)", sc.Tag, sc.Path)
		sh, err := sharefs.New(sharefs.Config{Root: sc.Path, ReadOnly: sc.ReadOnly})
		if err != nil {
			return inputErrorf("--share %s: %w", sc.Path, err)
		}
		dev, err := virtio9p.New(sc.Tag, sh)
		if err != nil {
			sh.Close()
			return inputErrorf("--share %s: %w", sc.Path, err)
		}
		if err := m.addVirtio(dev, sh, what); err != nil {
			return err
		}
		m.shareRoots = append(m.shareRoots, sh.Root())
		m.shares = append(m.shares, dev)
	}
	if m.cfg.VirtioConsole {
		dev, err := virtioconsole.New(m.cfg.Stdout)
		if err != nil {
			return fmt.Errorf("vmm: console: %w", err)
		}
		if err := m.addVirtio(dev, dev, "console"); err != nil {
			return err
		}
		m.vcons = dev
	}
	if m.cfg.RNG {
		dev := virtiorng.New(virtiorng.Config{Rate: m.cfg.RNGRate})
		if err := m.addVirtio(dev, nopCloser{}, "rng"); err != nil {
			return err
		}
	}
	if m.cfg.PVPanic {
		return m.addPVPanic()
	}
	return nil
}

// ShareRoots are the --share directories' root descriptors (the sandbox's
// argument conditions).
func (m *Machine) ShareRoots() []int { return m.shareRoots }

// nopCloser is the backend of a device that has none (virtio-rng reads
// getrandom(2)).
type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// addVirtio wraps dev in the legacy virtio-PCI transport and plugs it into
// the next free slot, with its notify register on a KVM ioeventfd. It takes
// backend (dev's disk image or tap): from here on the slot's close, or
// addVirtio itself when it fails, closes it.
func (m *Machine) addVirtio(dev virtio.Device, backend io.Closer, what string) error {
	slot := uint8(len(m.slots) + 1)
	irqNum, ok := pci.SlotIRQ(slot)
	if !ok {
		backend.Close()
		return inputErrorf("too many devices: govm has %d PCI interrupt lines; %s does not fit", len(m.slots), what)
	}
	name := what
	logf := func(format string, args ...any) { m.logf(name+": "+format, args...) }
	pd, err := virtiopci.New(dev, m.ram.mem, irq.KVMLine{Chip: m.vm, GSI: uint32(irqNum)}, irqNum, logf)
	if err != nil {
		backend.Close()
		return fmt.Errorf("vmm: %s: %w", what, err)
	}
	if err := m.pci.Add(slot, pd); err != nil {
		backend.Close()
		return fmt.Errorf("vmm: %s: %w", what, err)
	}
	// From here on the slot's close undoes everything.
	pd.SetGate(m.gate, what)
	pd.SetFaults(m.cfg.Faults)
	m.slots = append(m.slots, pciSlot{slot: slot, irq: irqNum, dev: pd, backend: backend, what: what})
	// Kicks through an ioeventfd skip the exit to user space; without it
	// (an old host) the port write on the vCPU thread still kicks.
	if err := pd.EnableIOEventFD(m.vm); err != nil {
		m.logf("%s: no ioeventfd (%v), kicks go through port exits", what, err)
	}
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
// call while the VM runs (govm prints it on SIGUSR1 and with --stats) and
// after Close, which it then answers with nothing: the rings are gone.
func (m *Machine) DeviceStats() []string {
	m.closeMu.RLock()
	defer m.closeMu.RUnlock()
	if m.closed {
		return nil
	}
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
	for _, s := range m.shares {
		out = append(out, fmt.Sprintf("share %s: %v", s.Tag(), s.Stats()))
	}
	return out
}

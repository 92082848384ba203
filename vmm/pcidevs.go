package vmm

import (
	"github.com/govm/govm/mptable"
)

// DiskConfig is one --disk.
type DiskConfig struct {
	Path     string
	ReadOnly bool
	Serial   string
}

// setupPCI builds the PCI bus and its virtio devices.
func (m *Machine) setupPCI() error {
	return nil
}

// mptableConfig describes the CPUs, the IOAPIC, the ISA interrupts and the
// PCI INTx routing govm drives.
func (m *Machine) mptableConfig() mptable.Config {
	return mptable.Config{CPUs: m.cfg.CPUs}
}

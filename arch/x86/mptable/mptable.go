// Package mptable writes the Intel MultiProcessor Specification 1.4 tables
// (the MP floating pointer structure and the MP configuration table) that
// tell a guest without ACPI how many CPUs it has, where its local APICs
// and IOAPIC are, and how ISA and PCI interrupts reach IOAPIC pins.
//
// ISA IRQ 0 routing: real PCs (and QEMU, which reprograms KVM's routing)
// wire the PIT to IOAPIC pin 2 and say so with an override. govm keeps
// KVM's default GSI routing (kvm_setup_default_irq_routing: GSI n drives
// PIC input n and IOAPIC pin n for n < 16), and the in-kernel PIT
// (KVM_CREATE_PIT2) raises GSI 0, so the timer arrives on IOAPIC pin 0.
// DefaultISAIRQs therefore maps every ISA IRQ to the pin of the same
// number, IRQ 0 -> pin 0 included (as Firecracker does for the same
// reason); Linux's check_timer() then finds the timer on pin 0. IRQ 2 is
// the PIC cascade, which nothing raises, and gets no entry. A VMM that
// installs its own routing with GSI 0 -> pin 2 must pass ISAIRQs to match.
package mptable

import (
	"errors"
	"fmt"

	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/guestmem"
)

// Errors.
var (
	ErrConfig    = errors.New("mptable: bad configuration")
	ErrUnaligned = errors.New("mptable: floating pointer must be 16-byte aligned")
)

// Constants of the PC platform (MP spec 1.4 chapter 3 and 4). The
// addresses (the tables' own, layout.MPTableAddr; the IOAPIC's and local
// APICs' MMIO bases) are package layout's.
const (
	// IOAPICPins is the number of redirection entries of KVM's IOAPIC.
	IOAPICPins = 24
	// MaxCPUs keeps LAPIC IDs 0..n-1 and the IOAPIC ID (n) below the
	// broadcast ID 0xff.
	MaxCPUs = 254

	lapicVersion  = 0x14 // integrated APIC, as KVM's LAPIC reports
	ioapicVersion = 0x11 // KVM's IOAPIC version register
	cpuSignature  = 0x600
	cpuFeatures   = 0x201 // CPUID.1:EDX FPU | APIC
)

// ISAIRQ routes one ISA IRQ to an IOAPIC input pin. ISA interrupts use
// the bus's conforming polarity and trigger (active high, edge).
type ISAIRQ struct {
	IRQ uint8 // ISA IRQ 0-15
	Pin uint8 // IOAPIC INTIN#
}

// PCIIRQ routes one PCI device's INTx pin on bus 0 to an IOAPIC pin.
type PCIIRQ struct {
	Device    uint8 // slot 0-31
	Pin       uint8 // 1 = INTA# ... 4 = INTD#, as in the Interrupt Pin register
	IRQ       uint8 // IOAPIC INTIN#
	Level     bool  // level triggered (PCI's convention) rather than edge
	ActiveLow bool  // active low (PCI's convention) rather than high
}

// Config describes the machine. Zero values pick the defaults noted.
type Config struct {
	CPUs       int    // 1..MaxCPUs; LAPIC IDs 0..CPUs-1, CPU 0 boots
	IOAPICID   uint8  // 0: CPUs (the first ID after the LAPICs)
	IOAPICAddr uint32 // 0: layout.IOAPICAddr
	// ISAIRQs nil means DefaultISAIRQs(); an empty non-nil slice means
	// no ISA interrupt entries.
	ISAIRQs []ISAIRQ
	PCI     []PCIIRQ
}

// DefaultISAIRQs is the identity routing of ISA IRQs 0-15 (without the
// cascade, IRQ 2) that matches KVM's default GSI routing; see the package
// comment for why IRQ 0 goes to pin 0.
func DefaultISAIRQs() []ISAIRQ {
	var r []ISAIRQ
	for i := uint8(0); i < 16; i++ {
		if i != 2 {
			r = append(r, ISAIRQ{IRQ: i, Pin: i})
		}
	}
	return r
}

func (c *Config) validate() error {
	if c.CPUs < 1 || c.CPUs > MaxCPUs {
		return fmt.Errorf("%w: %d CPUs (1..%d)", ErrConfig, c.CPUs, MaxCPUs)
	}
	if int(c.IOAPICID) < c.CPUs && c.IOAPICID != 0 || c.IOAPICID == 0xff {
		return fmt.Errorf("%w: IOAPIC ID %d collides with a LAPIC ID", ErrConfig, c.IOAPICID)
	}
	for _, e := range c.ISAIRQs {
		if e.IRQ > 15 || e.Pin >= IOAPICPins {
			return fmt.Errorf("%w: ISA IRQ %d -> pin %d", ErrConfig, e.IRQ, e.Pin)
		}
	}
	for _, e := range c.PCI {
		if e.Device > 31 || e.Pin < 1 || e.Pin > 4 || e.IRQ >= IOAPICPins {
			return fmt.Errorf("%w: PCI slot %d INT%c -> pin %d", ErrConfig, e.Device, 'A'-1+rune(e.Pin), e.IRQ)
		}
	}
	return nil
}

// Write places the floating pointer at addr and the configuration table
// right after it, and returns the first byte after the tables. The caller
// must keep [addr, end) out of the guest's usable RAM (e820 reserved).
func Write(mem *guestmem.Memory, addr uint64, cfg Config) (end uint64, err error) {
	if addr%16 != 0 {
		return 0, fmt.Errorf("%w: %#x", ErrUnaligned, addr)
	}
	if err := cfg.validate(); err != nil {
		return 0, err
	}
	if cfg.IOAPICID == 0 {
		cfg.IOAPICID = uint8(cfg.CPUs)
	}
	if cfg.IOAPICAddr == 0 {
		cfg.IOAPICAddr = layout.IOAPICAddr
	}
	if cfg.ISAIRQs == nil {
		cfg.ISAIRQs = DefaultISAIRQs()
	}
	table := buildTable(&cfg)
	tableAddr := addr + floatingSize
	if tableAddr+uint64(len(table)) > 1<<32 {
		return 0, fmt.Errorf("%w: tables at %#x end above 4 GiB", ErrConfig, addr)
	}
	buf := append(floatingPointer(uint32(tableAddr)), table...)
	if err := mem.WriteAt(buf, addr); err != nil {
		return 0, fmt.Errorf("mptable: write %d bytes at %#x: %w", len(buf), addr, err)
	}
	return addr + uint64(len(buf)), nil
}

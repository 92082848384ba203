package mptable

import (
	"encoding/binary"

	"github.com/govm/govm/arch/x86/layout"
)

// Structure sizes and entry types (MP spec 1.4 sections 4.1, 4.2, 4.3).
const (
	floatingSize  = 16
	headerSize    = 44
	processorSize = 20
	entrySize     = 8 // bus, IOAPIC, I/O and local interrupt entries

	entryProcessor = 0
	entryBus       = 1
	entryIOAPIC    = 2
	entryIOInt     = 3
	entryLocalInt  = 4

	specRev = 4 // spec 1.4

	cpuEnabled = 0x01
	cpuBSP     = 0x02

	intINT    = 0
	intNMI    = 1
	intExtINT = 3

	// I/O interrupt flags (MP spec table 4-10): PO bits 1:0, EL bits 3:2.
	polActiveHigh = 0x1
	polActiveLow  = 0x3
	trigEdge      = 0x1 << 2
	trigLevel     = 0x3 << 2

	allLAPICs = 0xff
)

// OEM strings, space padded as the spec asks.
var (
	oemID     = [8]byte{'G', 'O', 'V', 'M', ' ', ' ', ' ', ' '}
	productID = [12]byte{'G', 'O', 'V', 'M', ' ', 'M', 'P', ' ', '1', '.', '4', ' '}
	busISA    = [6]byte{'I', 'S', 'A', ' ', ' ', ' '}
	busPCI    = [6]byte{'P', 'C', 'I', ' ', ' ', ' '}
)

// checksum returns the byte that makes b sum to zero modulo 256.
func checksum(b []byte) byte {
	var s byte
	for _, v := range b {
		s += v
	}
	return -s
}

// floatingPointer is the MP floating pointer structure (MP spec 4.1).
// Feature byte 1 = 0: a configuration table is present. Feature byte 2
// bit 7 (IMCR present, PIC mode) is clear: virtual wire mode, because KVM
// has no IMCR at ports 0x22/0x23.
func floatingPointer(tableAddr uint32) []byte {
	b := make([]byte, floatingSize)
	copy(b, "_MP_")
	binary.LittleEndian.PutUint32(b[4:], tableAddr)
	b[8] = 1 // length in 16-byte paragraphs
	b[9] = specRev
	b[10] = checksum(b)
	return b
}

// buildTable encodes the configuration table (MP spec 4.2, 4.3): the
// header, then the entries grouped by type in ascending type order.
func buildTable(cfg *Config) []byte {
	pci := len(cfg.PCI) > 0
	// Linux looks PCI interrupts up by source bus ID == PCI bus number,
	// so the PCI bus must be ID 0; ISA then takes ID 1.
	var isaID, pciID uint8 = 0, 0
	if pci {
		isaID = 1
	}

	b := make([]byte, headerSize)
	count := 0
	add := func(e []byte) {
		b = append(b, e...)
		count++
	}
	for i := 0; i < cfg.CPUs; i++ {
		e := make([]byte, processorSize)
		e[0] = entryProcessor
		e[1] = uint8(i) // LAPIC ID
		e[2] = lapicVersion
		e[3] = cpuEnabled
		if i == 0 {
			e[3] |= cpuBSP
		}
		binary.LittleEndian.PutUint32(e[4:], cpuSignature)
		binary.LittleEndian.PutUint32(e[8:], cpuFeatures)
		add(e)
	}
	if pci {
		add(bus(pciID, busPCI))
	}
	add(bus(isaID, busISA))
	add([]byte{entryIOAPIC, cfg.IOAPICID, ioapicVersion, 1, // flags: usable
		byte(cfg.IOAPICAddr), byte(cfg.IOAPICAddr >> 8), byte(cfg.IOAPICAddr >> 16), byte(cfg.IOAPICAddr >> 24)})
	for _, e := range cfg.ISAIRQs {
		// Flags 0: conforms to the ISA bus (active high, edge).
		add(intEntry(entryIOInt, intINT, 0, isaID, e.IRQ, cfg.IOAPICID, e.Pin))
	}
	for _, e := range cfg.PCI {
		flags := uint16(polActiveHigh | trigEdge)
		if e.ActiveLow {
			flags = flags&^3 | polActiveLow
		}
		if e.Level {
			flags = flags&^(3<<2) | trigLevel
		}
		// Source bus IRQ for PCI (MP spec table 4-11 note): bits 6:2
		// device number, bits 1:0 pin (0 = INTA#).
		src := e.Device<<2 | (e.Pin - 1)
		add(intEntry(entryIOInt, intINT, flags, pciID, src, cfg.IOAPICID, e.IRQ))
	}
	// Virtual wire: the 8259's INTR on every LAPIC's LINT0, NMI on LINT1.
	add(intEntry(entryLocalInt, intExtINT, 0, isaID, 0, allLAPICs, 0))
	add(intEntry(entryLocalInt, intNMI, 0, isaID, 0, allLAPICs, 1))

	copy(b, "PCMP")
	binary.LittleEndian.PutUint16(b[4:], uint16(len(b)))
	b[6] = specRev
	copy(b[8:16], oemID[:])
	copy(b[16:28], productID[:])
	// 28: OEM table pointer, 32: OEM table size: none.
	binary.LittleEndian.PutUint16(b[34:], uint16(count))
	binary.LittleEndian.PutUint32(b[36:], layout.LAPICAddr)
	// 40: extended table length and checksum: no extended entries.
	b[7] = checksum(b)
	return b
}

func bus(id uint8, typ [6]byte) []byte {
	return append([]byte{entryBus, id}, typ[:]...)
}

// intEntry is an I/O (type 3) or local (type 4) interrupt assignment entry
// (MP spec 4.3.4, 4.3.5); dst is the IOAPIC or LAPIC ID, pin its INTIN# or
// LINTIN#.
func intEntry(typ, kind uint8, flags uint16, srcBus, srcIRQ, dst, pin uint8) []byte {
	return []byte{typ, kind, byte(flags), byte(flags >> 8), srcBus, srcIRQ, dst, pin}
}

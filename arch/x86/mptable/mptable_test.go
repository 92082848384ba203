package mptable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/guestmem"
)

// parsed is what an independent reader of MP spec 1.4 sees.
type parsed struct {
	tableAddr  uint32
	feature2   byte
	oem, prod  string
	lapic      uint32
	cpus       []cpu
	buses      map[uint8]string
	ioapicID   uint8
	ioapicVer  uint8
	ioapicAddr uint32
	ioInts     []intr
	localInts  []intr
}

type cpu struct {
	id    uint8
	flags uint8
}

type intr struct {
	kind          uint8
	flags         uint16
	srcBus, srcIR uint8
	dst, pin      uint8
}

func sum(b []byte) byte {
	var s byte
	for _, v := range b {
		s += v
	}
	return s
}

// parse scans [start, start+n) for the floating pointer on 16-byte
// boundaries, as Linux's smp_scan_config does, and walks the table.
func parse(ram []byte, start, n int) (*parsed, error) {
	fp := -1
	for a := start; a+16 <= start+n; a += 16 {
		if string(ram[a:a+4]) == "_MP_" && ram[a+8] == 1 && sum(ram[a:a+16]) == 0 {
			fp = a
			break
		}
	}
	if fp < 0 {
		return nil, errors.New("no floating pointer")
	}
	if ram[fp+9] != 4 {
		return nil, fmt.Errorf("spec rev %d", ram[fp+9])
	}
	p := &parsed{buses: map[uint8]string{}, feature2: ram[fp+12]}
	if ram[fp+11] != 0 {
		return nil, fmt.Errorf("default configuration %d", ram[fp+11])
	}
	p.tableAddr = binary.LittleEndian.Uint32(ram[fp+4:])
	t := ram[p.tableAddr:]
	if string(t[:4]) != "PCMP" {
		return nil, errors.New("no PCMP")
	}
	length := int(binary.LittleEndian.Uint16(t[4:]))
	if sum(t[:length]) != 0 {
		return nil, errors.New("table checksum")
	}
	if t[6] != 4 {
		return nil, fmt.Errorf("table spec rev %d", t[6])
	}
	p.oem, p.prod = string(t[8:16]), string(t[16:28])
	count := int(binary.LittleEndian.Uint16(t[34:]))
	p.lapic = binary.LittleEndian.Uint32(t[36:])
	off := 44
	lastType := -1
	for i := 0; i < count; i++ {
		if off >= length {
			return nil, fmt.Errorf("entry %d past table end", i)
		}
		typ := int(t[off])
		if typ < lastType {
			return nil, fmt.Errorf("entry %d type %d after type %d", i, typ, lastType)
		}
		lastType = typ
		e := t[off:]
		switch typ {
		case 0:
			p.cpus = append(p.cpus, cpu{e[1], e[3]})
			off += 20
			continue
		case 1:
			p.buses[e[1]] = string(e[2:8])
		case 2:
			p.ioapicID, p.ioapicVer = e[1], e[2]
			if e[3]&1 == 0 {
				return nil, errors.New("IOAPIC unusable")
			}
			p.ioapicAddr = binary.LittleEndian.Uint32(e[4:])
		case 3, 4:
			in := intr{e[1], binary.LittleEndian.Uint16(e[2:]), e[4], e[5], e[6], e[7]}
			if typ == 3 {
				p.ioInts = append(p.ioInts, in)
			} else {
				p.localInts = append(p.localInts, in)
			}
		default:
			return nil, fmt.Errorf("unknown entry type %d", typ)
		}
		off += 8
	}
	if off != length {
		return nil, fmt.Errorf("entries end at %d, length %d", off, length)
	}
	return p, nil
}

func newMem(t *testing.T) (*guestmem.Memory, []byte) {
	ram := make([]byte, 1<<20)
	m, err := guestmem.New(guestmem.Region{GPA: 0, Host: ram})
	if err != nil {
		t.Fatal(err)
	}
	return m, ram
}

func TestLayoutAndChecksums(t *testing.T) {
	for _, cpus := range []int{1, 2, 8, MaxCPUs} {
		t.Run(fmt.Sprint(cpus, "cpus"), func(t *testing.T) {
			m, ram := newMem(t)
			end, err := Write(m, layout.MPTableAddr, Config{CPUs: cpus})
			if err != nil {
				t.Fatal(err)
			}
			wantLen := 16 + 44 + 20*cpus + 8*(1+1+15+2)
			if end != layout.MPTableAddr+uint64(wantLen) {
				t.Fatalf("end %#x, want %#x", end, layout.MPTableAddr+wantLen)
			}
			if s := sum(ram[layout.MPTableAddr : layout.MPTableAddr+16]); s != 0 {
				t.Fatalf("floating pointer sums to %#x", s)
			}
			if s := sum(ram[layout.MPTableAddr+16 : end]); s != 0 {
				t.Fatalf("table sums to %#x", s)
			}
			p, err := parse(ram, 0xf0000, 0x10000)
			if err != nil {
				t.Fatal(err)
			}
			if p.tableAddr != layout.MPTableAddr+16 || p.lapic != layout.LAPICAddr || p.feature2 != 0 {
				t.Fatalf("table %#x lapic %#x feature2 %#x", p.tableAddr, p.lapic, p.feature2)
			}
			if p.oem != "GOVM    " || len(p.prod) != 12 {
				t.Fatalf("oem %q product %q", p.oem, p.prod)
			}
			if len(p.cpus) != cpus {
				t.Fatalf("%d processor entries", len(p.cpus))
			}
			for i, c := range p.cpus {
				want := uint8(cpuEnabled)
				if i == 0 {
					want |= cpuBSP
				}
				if c.id != uint8(i) || c.flags != want {
					t.Fatalf("cpu %d: id %d flags %#x", i, c.id, c.flags)
				}
			}
			if p.ioapicID != uint8(cpus) || p.ioapicVer != 0x11 || p.ioapicAddr != layout.IOAPICAddr {
				t.Fatalf("ioapic id %d ver %#x addr %#x", p.ioapicID, p.ioapicVer, p.ioapicAddr)
			}
			if len(p.buses) != 1 || p.buses[0] != "ISA   " {
				t.Fatalf("buses %q", p.buses)
			}
			if len(p.ioInts) != 15 {
				t.Fatalf("%d I/O interrupt entries", len(p.ioInts))
			}
			for _, in := range p.ioInts {
				if in.srcIR == 2 || in.pin != in.srcIR || in.dst != p.ioapicID || in.flags != 0 || in.srcBus != 0 {
					t.Fatalf("ISA entry %+v", in)
				}
			}
			wantLocal := []intr{{intExtINT, 0, 0, 0, 0xff, 0}, {intNMI, 0, 0, 0, 0xff, 1}}
			if fmt.Sprint(p.localInts) != fmt.Sprint(wantLocal) {
				t.Fatalf("local interrupts %+v", p.localInts)
			}
		})
	}
}

func TestPCIEntries(t *testing.T) {
	m, ram := newMem(t)
	cfg := Config{CPUs: 2, PCI: []PCIIRQ{
		{Device: 3, Pin: 1, IRQ: 10, Level: true, ActiveLow: true},
		{Device: 31, Pin: 4, IRQ: 23},
	}}
	end, err := Write(m, layout.MPTableAddr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := parse(ram, 0xf0000, 0x10000)
	if err != nil {
		t.Fatal(err)
	}
	if p.buses[0] != "PCI   " || p.buses[1] != "ISA   " {
		t.Fatalf("buses %q", p.buses)
	}
	n := len(p.ioInts)
	got := p.ioInts[n-2:]
	want := []intr{
		{intINT, 0x0f, 0, 3<<2 | 0, 2, 10},  // level, active low
		{intINT, 0x05, 0, 31<<2 | 3, 2, 23}, // edge, active high
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("PCI entries %+v, want %+v", got, want)
	}
	// The raw bytes of the first PCI entry, per MP spec 4.3.4.
	raw := ram[end-8*4 : end-8*3]
	if fmt.Sprintf("% x", raw) != "03 00 0f 00 00 0c 02 0a" {
		t.Fatalf("raw entry % x", raw)
	}
	for _, in := range p.ioInts[:n-2] {
		if in.srcBus != 1 {
			t.Fatalf("ISA entry on bus %d, want 1", in.srcBus)
		}
	}
}

func TestCustomISARouting(t *testing.T) {
	m, ram := newMem(t)
	_, err := Write(m, 0x9fc00, Config{CPUs: 1, IOAPICID: 5, IOAPICAddr: 0xfec01000,
		ISAIRQs: []ISAIRQ{{IRQ: 0, Pin: 2}, {IRQ: 4, Pin: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := parse(ram, 0x9fc00, 0x400)
	if err != nil {
		t.Fatal(err)
	}
	if p.ioapicID != 5 || p.ioapicAddr != 0xfec01000 || len(p.ioInts) != 2 || p.ioInts[0].pin != 2 || p.ioInts[0].dst != 5 {
		t.Fatalf("parsed %+v", p)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		addr uint64
		cfg  Config
		want error
	}{
		{"no cpus", layout.MPTableAddr, Config{}, ErrConfig},
		{"too many cpus", layout.MPTableAddr, Config{CPUs: 255}, ErrConfig},
		{"ioapic id collides", layout.MPTableAddr, Config{CPUs: 4, IOAPICID: 3}, ErrConfig},
		{"ioapic id broadcast", layout.MPTableAddr, Config{CPUs: 4, IOAPICID: 0xff}, ErrConfig},
		{"isa irq 16", layout.MPTableAddr, Config{CPUs: 1, ISAIRQs: []ISAIRQ{{16, 16}}}, ErrConfig},
		{"pci pin 0", layout.MPTableAddr, Config{CPUs: 1, PCI: []PCIIRQ{{Device: 1, Pin: 0, IRQ: 9}}}, ErrConfig},
		{"pci slot 32", layout.MPTableAddr, Config{CPUs: 1, PCI: []PCIIRQ{{Device: 32, Pin: 1, IRQ: 9}}}, ErrConfig},
		{"pci irq 24", layout.MPTableAddr, Config{CPUs: 1, PCI: []PCIIRQ{{Device: 1, Pin: 1, IRQ: 24}}}, ErrConfig},
		{"unaligned", layout.MPTableAddr + 8, Config{CPUs: 1}, ErrUnaligned},
		{"outside memory", 1<<20 - 16, Config{CPUs: 1}, guestmem.ErrOutOfRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newMem(t)
			if _, err := Write(m, tc.addr, tc.cfg); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

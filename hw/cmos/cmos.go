// Package cmos emulates the MC146818 real-time clock and its battery-backed
// CMOS RAM at ports 0x70 (index) and 0x71 (data).
//
// The clock is read-only host time: each read of a time register converts
// now() in the mode status register B selects (BCD or binary, 24 or 12
// hour). Writes to the time registers are stored but do not move the
// clock (a guest's hwclock --systohc is a no-op). Update-in-progress is
// never set and there are no RTC interrupts (no IRQ8), which Linux's
// mc146818_get_time() and rtc-cmos tolerate.
//
// The memory-size bytes are the ones SeaBIOS and QEMU's pc_cmos_init()
// use, derived from the RAM size and govm's memory map (package layout:
// RAM below layout.PCIHoleStart, the rest from layout.HighRAMStart).
package cmos

import (
	"sync"
	"time"

	"github.com/govm/govm/arch/x86/layout"
)

// Ports: register at Base with length NumPorts; off 0 is the index
// register, off 1 the data register.
const (
	Base     = 0x70
	NumPorts = 2
)

// Register indexes (MC146818 data sheet; IBM PC/AT CMOS map).
const (
	RegSeconds    = 0x00
	RegMinutes    = 0x02
	RegHours      = 0x04
	RegWeekday    = 0x06
	RegDayOfMonth = 0x07
	RegMonth      = 0x08
	RegYear       = 0x09
	RegStatusA    = 0x0a
	RegStatusB    = 0x0b
	RegStatusC    = 0x0c
	RegStatusD    = 0x0d
	RegCentury    = 0x32 // IBM PC/AT; the ACPI FADT would name it
	regBaseLo     = 0x15 // base memory in KiB
	regBaseHi     = 0x16
	regExtLo      = 0x17 // memory above 1 MiB in KiB, max 0xffff
	regExtHi      = 0x18
	regExt2Lo     = 0x30 // the same again
	regExt2Hi     = 0x31
	regHighLo     = 0x34 // memory above 16 MiB (below 4 GiB) in 64 KiB units
	regHighHi     = 0x35
	regAbove4G    = 0x5b // memory above 4 GiB in 64 KiB units, 3 bytes
	numRegs       = 128
	indexMask     = 0x7f // bit 7 of the index is the NMI mask: ignored
)

// Status register bits.
const (
	statusBDM     = 0x04 // data mode: binary when set, BCD when clear
	statusB24h    = 0x02 // 24-hour mode
	statusDVRT    = 0x80 // valid RAM and time: the battery is fine
	statusAUIP    = 0x80 // update in progress: never set
	statusADivOsc = 0x26 // 32.768 kHz time base, 1024 Hz periodic rate
	hour12PM      = 0x80 // PM flag in the hours register in 12-hour mode
)

// CMOS is the RTC and its RAM. It is safe for concurrent use.
type CMOS struct {
	mu    sync.Mutex
	now   func() time.Time
	index byte
	ram   [numRegs]byte
}

// New returns a CMOS for a guest with memSize bytes of RAM whose clock
// reads now (time.Now in production; the UTC wall clock is what Linux
// expects of a PC RTC, so times are converted to UTC).
func New(memSize uint64, now func() time.Time) *CMOS {
	c := &CMOS{now: now}
	c.ram[RegStatusA] = statusADivOsc
	c.ram[RegStatusB] = statusB24h // BCD, 24 h: what PC firmware sets
	c.ram[RegStatusD] = statusDVRT
	c.setMemory(memSize)
	return c
}

func (c *CMOS) setMemory(memSize uint64) {
	put16 := func(lo int, v uint64) {
		c.ram[lo] = byte(v)
		c.ram[lo+1] = byte(v >> 8)
	}
	put16(regBaseLo, 640)
	low := min(memSize, layout.PCIHoleStart)
	ext := uint64(0)
	if low > layout.HighMemStart {
		ext = min((low-layout.HighMemStart)>>10, 0xffff)
	}
	put16(regExtLo, ext)
	put16(regExt2Lo, ext)
	high := uint64(0)
	if low > 16<<20 {
		high = min((low-16<<20)>>16, 0xffff)
	}
	put16(regHighLo, high)
	var above uint64
	if memSize > layout.PCIHoleStart {
		above = (memSize - layout.PCIHoleStart) >> 16 // mapped at layout.HighRAMStart
	}
	above = min(above, 0xffffff)
	c.ram[regAbove4G] = byte(above)
	c.ram[regAbove4G+1] = byte(above >> 8)
	c.ram[regAbove4G+2] = byte(above >> 16)
}

// Read implements iobus.Device. Reading the index port returns the last
// index written (real chips float; this helps nobody less).
func (c *CMOS) Read(off uint16, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range data {
		switch off + uint16(i) {
		case 0:
			data[i] = c.index
		case 1:
			data[i] = c.read(c.index)
		default:
			data[i] = 0xff
		}
	}
}

// Write implements iobus.Device.
func (c *CMOS) Write(off uint16, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, v := range data {
		switch off + uint16(i) {
		case 0:
			c.index = v & indexMask
		case 1:
			c.write(c.index, v)
		}
	}
}

func (c *CMOS) write(reg, v byte) {
	switch reg {
	case RegStatusC, RegStatusD:
		return // read-only
	case RegStatusA:
		v &^= statusAUIP // UIP is read-only
	}
	c.ram[reg] = v
}

func (c *CMOS) read(reg byte) byte {
	switch reg {
	case RegSeconds, RegMinutes, RegHours, RegWeekday, RegDayOfMonth, RegMonth, RegYear, RegCentury:
		return c.clock(reg, c.now().UTC())
	case RegStatusC:
		return 0 // no interrupt flags: there is no IRQ8
	}
	return c.ram[reg]
}

// clock encodes one time field in the mode status B selects.
func (c *CMOS) clock(reg byte, t time.Time) byte {
	var v int
	pm := false
	switch reg {
	case RegSeconds:
		v = t.Second()
	case RegMinutes:
		v = t.Minute()
	case RegHours:
		v = t.Hour()
		if c.ram[RegStatusB]&statusB24h == 0 {
			pm = v >= 12
			v %= 12
			if v == 0 {
				v = 12
			}
		}
	case RegWeekday:
		v = int(t.Weekday()) + 1 // 1 = Sunday
	case RegDayOfMonth:
		v = t.Day()
	case RegMonth:
		v = int(t.Month())
	case RegYear:
		v = t.Year() % 100
	case RegCentury:
		v = t.Year() / 100 % 100
	}
	b := byte(v)
	if c.ram[RegStatusB]&statusBDM == 0 {
		b = toBCD(v)
	}
	if pm {
		b |= hour12PM
	}
	return b
}

// toBCD packs 0-99 as two decimal digits.
func toBCD(v int) byte { return byte(v/10<<4 | v%10) }

package cmos

import (
	"testing"
	"time"
)

func get(c *CMOS, reg byte) byte {
	c.Write(0, []byte{reg})
	var b [1]byte
	c.Read(1, b[:])
	return b[0]
}

func set(c *CMOS, reg, v byte) {
	c.Write(0, []byte{reg})
	c.Write(1, []byte{v})
}

var fixed = time.Date(2026, time.November, 29, 23, 5, 9, 0, time.UTC) // a Sunday

func TestClockBCD24h(t *testing.T) {
	c := New(512<<20, func() time.Time { return fixed })
	tests := []struct {
		reg  byte
		want byte
	}{
		{RegSeconds, 0x09},
		{RegMinutes, 0x05},
		{RegHours, 0x23},
		{RegWeekday, 0x01},
		{RegDayOfMonth, 0x29},
		{RegMonth, 0x11},
		{RegYear, 0x26},
		{RegCentury, 0x20},
		{RegStatusA, 0x26},
		{RegStatusB, 0x02},
		{RegStatusC, 0x00},
		{RegStatusD, 0x80},
	}
	for _, tc := range tests {
		if got := get(c, tc.reg); got != tc.want {
			t.Errorf("reg %#x = %#x, want %#x", tc.reg, got, tc.want)
		}
	}
}

func TestClockModes(t *testing.T) {
	local := fixed.In(time.FixedZone("x", 3600)) // converted back to UTC
	c := New(512<<20, func() time.Time { return local })
	set(c, RegStatusB, statusBDM|statusB24h)
	if h, s := get(c, RegHours), get(c, RegSeconds); h != 23 || s != 9 {
		t.Fatalf("binary mode: hours %d seconds %d", h, s)
	}
	set(c, RegStatusB, 0) // BCD, 12 h
	if h := get(c, RegHours); h != 0x80|0x11 {
		t.Fatalf("12h BCD 23:00 = %#x, want PM|0x11", h)
	}
	midnight := time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC)
	c.now = func() time.Time { return midnight }
	if h := get(c, RegHours); h != 0x12 {
		t.Fatalf("12h BCD 00:30 = %#x, want 0x12", h)
	}
}

func TestIndexNMIBitAndRAM(t *testing.T) {
	c := New(512<<20, time.Now)
	set(c, 0x80|0x40, 0xab) // NMI mask bit set: register 0x40
	if got := get(c, 0x40); got != 0xab {
		t.Fatalf("CMOS RAM 0x40 = %#x", got)
	}
	set(c, RegStatusD, 0)
	set(c, RegStatusA, 0xa6)
	if d, a := get(c, RegStatusD), get(c, RegStatusA); d != 0x80 || a != 0x26 {
		t.Fatalf("status D %#x (read-only), A %#x (UIP read-only)", d, a)
	}
}

func TestMemorySize(t *testing.T) {
	tests := []struct {
		name             string
		mem              uint64
		ext, high, above uint32
	}{
		{"512M", 512 << 20, 0xffff, (512 - 16) << 4, 0},
		{"32M", 32 << 20, 31 << 10, 16 << 4, 0},
		{"8M", 8 << 20, 7 << 10, 0, 0},
		{"3G", 3 << 30, 0xffff, (3<<30 - 16<<20) >> 16, 0},
		{"6G", 6 << 30, 0xffff, (3<<30 - 16<<20) >> 16, (3 << 30) >> 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.mem, time.Now)
			word := func(lo byte) uint32 { return uint32(get(c, lo)) | uint32(get(c, lo+1))<<8 }
			if got := word(regBaseLo); got != 640 {
				t.Errorf("base %d KiB", got)
			}
			if got, got2 := word(regExtLo), word(regExt2Lo); got != tc.ext || got2 != tc.ext {
				t.Errorf("extended %#x/%#x, want %#x", got, got2, tc.ext)
			}
			if got := word(regHighLo); got != tc.high {
				t.Errorf("above 16M %#x, want %#x", got, tc.high)
			}
			above := uint32(get(c, regAbove4G)) | uint32(get(c, regAbove4G+1))<<8 | uint32(get(c, regAbove4G+2))<<16
			if above != tc.above {
				t.Errorf("above 4G %#x, want %#x", above, tc.above)
			}
		})
	}
}

func FuzzCMOS(f *testing.F) {
	f.Add([]byte{0, 0x0b, 1, 0x06, 0, 0x04})
	f.Fuzz(func(t *testing.T, ops []byte) {
		c := New(1<<30, time.Now)
		for i := 0; i+1 < len(ops); i += 2 {
			var buf [4]byte
			data := buf[:1+int(ops[i]>>2&3)]
			data[0] = ops[i+1]
			if ops[i]&0x80 != 0 {
				c.Read(uint16(ops[i]&3), data)
			} else {
				c.Write(uint16(ops[i]&3), data)
			}
			if c.index >= numRegs {
				t.Fatalf("index %#x", c.index)
			}
		}
	})
}

package pci

import (
	"encoding/binary"
	"testing"
)

// FuzzConfigSpace drives the configuration ports (and the BAR window) with
// arbitrary accesses, as a hostile guest could. Each op is 6 bytes:
// kind, port selector, size selector, 3 value bytes. Invariants: nothing
// panics, IDs of present devices never change, CONFIG_ADDRESS reserved bits
// stay zero, and the port bus decodes the BAR exactly where the device says
// it does.
func FuzzConfigSpace(f *testing.F) {
	f.Add([]byte{1, 0, 2, 0x18, 0, 0x80, 1, 4, 2, 0xff, 0xff, 0xff})
	f.Add([]byte{1, 0, 2, 0x10, 0x18, 0x80, 1, 4, 2, 0x00, 0x70, 0x00, 0, 6, 2, 0, 0, 0})
	f.Add([]byte{1, 0, 2, 0x04, 0x18, 0x80, 1, 4, 0, 0, 0, 0, 1, 5, 1, 0xff, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		io, b, d, _ := newTestBus(t)
		b.logf = func(string, ...any) {} // the fuzzer causes many failures on purpose
		hb := b.slots[0].dev
		for len(ops) >= 6 {
			op := ops[:6]
			ops = ops[6:]
			size := []int{1, 2, 4, 3}[op[2]&3]
			port := uint16(ConfigAddrPort) + uint16(op[1]&7)
			if op[1]&0x80 != 0 { // sometimes hit the BAR window instead
				port = SlotIOBase(3) + uint16(op[1]&0x3F)
			}
			data := make([]byte, size)
			v := uint32(op[3]) | uint32(op[4])<<8 | uint32(op[5])<<16 | uint32(op[5]&0x80)<<24
			for i := range data {
				data[i] = byte(v >> (8 * i))
			}
			if op[0]&1 != 0 {
				io.Write(port, data)
			} else {
				io.Read(port, data)
			}
			checkIDs(t, hb, HostBridgeVendor, HostBridgeDevice)
			checkIDs(t, d, testVendor, testDevice)
			if b.addr&^addrRWMask != 0 {
				t.Fatalf("CONFIG_ADDRESS reserved bits set: %#x", b.addr)
			}
			base, size16, on := d.IOBAR()
			s := b.slots[3]
			if s.mapped && (!on || uint32(s.base) != base || s.size != size16) {
				t.Fatalf("mapped at %#x but device decodes %#x (on=%v)", s.base, base, on)
			}
		}
	})
}

func checkIDs(t *testing.T, d Device, vendor, device uint16) {
	t.Helper()
	var id [4]byte
	d.ConfigRead(0, id[:])
	if v, dv := binary.LittleEndian.Uint16(id[:]), binary.LittleEndian.Uint16(id[2:]); v != vendor || dv != device {
		t.Fatalf("IDs changed to %04x:%04x", v, dv)
	}
}

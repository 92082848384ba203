package virtiotest

import "encoding/binary"

// Raw packed-ring access, for hostile-guest tests and for reading results.

// DescAddr, DriverAddr and DeviceAddr are where the ring parts are.
func (d *PackedDriver) DescAddr() uint64   { return d.desc }
func (d *PackedDriver) DriverAddr() uint64 { return d.driver } // see DescAddr
func (d *PackedDriver) DeviceAddr() uint64 { return d.device } // see DescAddr

// Size is the queue size.
func (d *PackedDriver) Size() uint16 { return d.size }

// SetDesc writes the descriptor at ring position p verbatim, with plain
// stores (for single-goroutine tests).
func (d *PackedDriver) SetDesc(p uint16, addr uint64, length uint32, id, flags uint16) {
	d.writeDesc(d.desc+16*uint64(p&(d.size-1)), addr, length, id, flags)
}

// SetIndirectDesc writes entry i of an indirect table at table verbatim.
func (d *PackedDriver) SetIndirectDesc(table uint64, i uint16, addr uint64, length uint32, id, flags uint16) {
	d.writeDesc(table+16*uint64(i), addr, length, id, flags)
}

// Desc reads the descriptor at ring position p.
func (d *PackedDriver) Desc(p uint16) (addr uint64, length uint32, id, flags uint16) {
	b, err := d.Mem.Slice(d.desc+16*uint64(p&(d.size-1)), 16)
	if err != nil {
		d.t.Errorf("virtiotest: %v", err)
		return
	}
	return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint32(b[8:]),
		binary.LittleEndian.Uint16(b[12:]), d.load16(d.desc + 16*uint64(p&(d.size-1)) + 14)
}

// SetDriverEvent writes the driver event suppression area verbatim. The
// driver's own notion of it (what DisableCB / EnableCB last asked for,
// which decides whether Collect moves off_wrap along) is left alone.
func (d *PackedDriver) SetDriverEvent(offWrap, flags uint16) {
	d.store16(d.driver, offWrap)
	d.store16(d.driver+2, flags)
}

// DeviceEvent reads the device event suppression area in one load.
func (d *PackedDriver) DeviceEvent() (offWrap, flags uint16) {
	v, err := d.Mem.LoadUint32(d.device)
	if err != nil {
		d.t.Errorf("virtiotest: %v", err)
	}
	return uint16(v), uint16(v >> 16)
}

func (d *PackedDriver) writeDesc(gpa, addr uint64, length uint32, id, flags uint16) {
	b, err := d.Mem.Slice(gpa, 16)
	if err != nil {
		d.t.Errorf("virtiotest: descriptor at %#x: %v", gpa, err)
		return
	}
	binary.LittleEndian.PutUint64(b[0:], addr)
	binary.LittleEndian.PutUint32(b[8:], length)
	binary.LittleEndian.PutUint16(b[12:], id)
	binary.LittleEndian.PutUint16(b[14:], flags)
}

// writeAddrLen writes addr and len of a head descriptor, not the word with
// id and flags the device may be polling (publish writes that).
func (d *PackedDriver) writeAddrLen(gpa, addr uint64, length uint32) {
	b, err := d.Mem.Slice(gpa, 12)
	if err != nil {
		d.t.Errorf("virtiotest: descriptor at %#x: %v", gpa, err)
		return
	}
	binary.LittleEndian.PutUint64(b[0:], addr)
	binary.LittleEndian.PutUint32(b[8:], length)
}

func (d *PackedDriver) store16(gpa uint64, v uint16) {
	if err := d.Mem.StoreUint16(gpa, v); err != nil {
		d.t.Errorf("virtiotest: %v", err)
	}
}

func (d *PackedDriver) load16(gpa uint64) uint16 {
	v, err := d.Mem.LoadUint16(gpa)
	if err != nil {
		d.t.Errorf("virtiotest: %v", err)
	}
	return v
}

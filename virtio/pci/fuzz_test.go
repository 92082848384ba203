package virtiopci

import (
	"errors"
	"testing"
)

// FuzzLegacyRegisters drives BAR0 with arbitrary reads and writes, as a
// hostile driver could, interleaved with device-side signals. Each op is 4
// bytes: kind, register offset, width selector, value. Invariants: nothing
// panics, the line is high exactly while the ISR is non-zero, every
// activation gets only configured queues whose rings lie in RAM, and a
// status write of 0 always resets the device.
func FuzzLegacyRegisters(f *testing.F) {
	f.Add([]byte{1, LegacyQueuePFN, 2, 1, 1, LegacyStatus, 0, StatusDriverOK, 2, 0, 0, 0, 0, LegacyISR, 0, 0})
	f.Add([]byte{1, LegacyQueueSelect, 1, 1, 1, LegacyQueuePFN, 2, 3, 1, LegacyStatus, 0, 7, 1, LegacyQueueNotify, 1, 1})
	f.Add([]byte{1, LegacyQueuePFN, 2, 0xff, 3, 0, 0, 0, 0, LegacyStatus, 3, 0, 1, LegacyStatus, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		r := newRig(t)
		zeroWrites := 0
		for len(ops) >= 4 {
			op := ops[:4]
			ops = ops[4:]
			width := []int{1, 2, 4, 3}[op[2]&3]
			off := uint16(op[1]) % 0x30 // header and some config
			v := uint32(op[3])
			if op[2]&4 != 0 {
				v |= 0xFFFFFF00 // reach huge PFNs and feature bits
			}
			switch op[0] % 6 {
			case 0:
				r.rd(off, width)
			case 1:
				if off == LegacyStatus && width == 1 && v&0xFF == 0 {
					zeroWrites++
				}
				r.wr(off, width, v)
			case 2:
				r.d.SignalUsed(int(op[3]))
			case 3:
				r.d.SignalConfig()
			case 4:
				r.d.DeviceError(errors.New("fuzz"))
			case 5:
				r.d.KickQueue(int(int8(op[3])))
			}
			r.checkLine(t)
			if r.dev.resets != zeroWrites {
				t.Fatalf("%d device resets for %d status-0 writes", r.dev.resets, zeroWrites)
			}
		}
		for _, a := range r.dev.activations {
			if len(a.Queues) != len(a.Bells) {
				t.Fatalf("%d queues, %d bells", len(a.Queues), len(a.Bells))
			}
			for i, q := range a.Queues {
				if q.Index != i {
					t.Fatalf("queue %d has index %d", i, q.Index)
				}
			}
		}
		if r.d.active {
			for i, q := range r.dev.activations[len(r.dev.activations)-1].Queues {
				if err := q.Validate(r.mem); err != nil {
					t.Fatalf("active queue %d invalid: %v", i, err)
				}
			}
		}
	})
}

package serial

import "testing"

// FuzzRegisters drives random register accesses and stdin input: nothing
// panics, the line always equals "an enabled interrupt is pending", and
// Set is never called without a level change.
func FuzzRegisters(f *testing.F) {
	f.Add([]byte{0x11, 0x0f, 0x21, 0x01, 0x02, 0x40, 0x41, 0x00})
	f.Add([]byte{0x31, 0x80, 0x01, 0x05, 0x12, 0x03, 0x41, 0x10, 0x01, 'a', 0x50, 0x60})
	f.Fuzz(func(t *testing.T, ops []byte) {
		u, l, _ := newTestUART()
		for i := 0; i+1 < len(ops); i += 2 {
			op, v := ops[i], ops[i+1]
			off := uint16(op & 0x0f) // includes offsets past the 8 registers
			switch op >> 4 & 3 {
			case 0:
				in(u, off)
			case 1:
				out(u, off, v)
			case 2:
				// Input only while it cannot block: the FIFO has room
				// and the receiver is connected.
				u.mu.Lock()
				ok := !u.loopback() && u.rxLen < u.rxCap()
				u.mu.Unlock()
				if ok {
					u.Input([]byte{v})
				}
			case 3:
				var wide [4]byte
				u.Read(off, wide[:1+int(v%4)])
			}
			checkLevel(t, u, l)
			u.mu.Lock()
			bad := u.rxLen < 0 || u.rxLen > FIFOSize || u.rxHead < 0 || u.rxHead >= FIFOSize
			u.mu.Unlock()
			if bad {
				t.Fatalf("FIFO state rxLen=%d rxHead=%d", u.rxLen, u.rxHead)
			}
		}
		u.Close()
	})
}

package decompress

import "encoding/binary"

// The x86 BCJ ("branch/call/jump") filter from the .xz format (section
// 5.3.1 of the .xz file format specification, the same filter 7-Zip calls
// BCJ). Before compression the encoder rewrote the 32-bit relative operand
// of CALL (E8) and JMP (E9) into an absolute target, so that repeated calls
// of one function become repeated byte strings. Decoding subtracts the
// instruction's position again. Only operands whose top byte is 0x00 or 0xFF
// (targets within +-16 MiB) were converted, and a small history of recent
// E8/E9 bytes that were *not* converted decides whether the current one is
// likely an opcode or just part of an earlier operand.

// bcjAllowed[m] says whether an E8/E9 may be converted given the history
// bits m of unconverted E8/E9 bytes in the preceding three positions.
var bcjAllowed = [8]bool{true, true, true, false, true, false, false, false}

// bcjByte[m] is which operand byte (counted from the top) the history points
// at, for the re-encoding loop below.
var bcjByte = [8]uint32{0, 1, 2, 2, 3, 3, 3, 3}

func bcjTopByteOK(b byte) bool { return b == 0x00 || b == 0xff }

// bcjX86Decode undoes the x86 BCJ filter in place over one whole block.
// start is the filter's start offset property (the position of buf[0]).
// The final four bytes can never hold a whole operand and stay as they are.
func bcjX86Decode(buf []byte, start uint32) {
	var hist uint32 // bit k: an unconverted E8/E9 stood k positions back (bit 4: its operand top byte looked valid)
	last := -1      // index of the previous E8/E9 byte, -1 for none
	for i := 0; i+5 <= len(buf); {
		if buf[i] != 0xe8 && buf[i] != 0xe9 {
			i++
			continue
		}
		if gap := i - last; last < 0 || gap > 5 {
			hist = 0
		} else {
			for ; gap > 0; gap-- {
				hist = (hist & 0x77) << 1
			}
		}
		last = i
		top := buf[i+4]
		// hist bit 4 is only ever set right before a shift, so here
		// hist>>1 < 8 whenever it is < 0x10; the bound also keeps the
		// table lookups in range.
		m := hist >> 1
		if !bcjTopByteOK(top) || m >= 8 || !bcjAllowed[m] {
			i++
			hist |= 1
			if bcjTopByteOK(top) {
				hist |= 0x10
			}
			continue
		}
		src := binary.LittleEndian.Uint32(buf[i+1:])
		pos := start + uint32(i) + 5
		var dst uint32
		for {
			dst = src - pos
			if hist == 0 {
				break
			}
			k := bcjByte[m]
			if !bcjTopByteOK(byte(dst >> (24 - 8*k))) {
				break
			}
			src = dst ^ (1<<(32-8*k) - 1)
		}
		// Bit 24 of the result is sign-extended into the top byte: the
		// encoder only converts targets within +-16 MiB.
		dst &= 0x01ffffff
		if dst&0x01000000 != 0 {
			dst |= 0xff000000
		}
		binary.LittleEndian.PutUint32(buf[i+1:], dst)
		i += 5
		hist = 0
	}
}

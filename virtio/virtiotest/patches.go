package virtiotest

import (
	"bytes"
	"encoding/binary"
)

// LoadPatches fills ram from a fuzz input's patches: each is a le16 guest
// physical address (modulo len(ram)), a length byte n and n bytes (cut at
// the end of the input and of ram). Later patches overwrite earlier ones;
// ram no patch covers keeps what it held.
//
// Fuzz targets take guest memory as patches rather than as a raw image: a
// ring's pages as a raw image make inputs of tens of kilobytes, and Go's
// minimizer, which runs an input about once per byte, then spends the
// fuzzing time minimizing instead of exploring.
func LoadPatches(ram, p []byte) {
	for len(p) >= 3 {
		gpa, n := int(binary.LittleEndian.Uint16(p))%len(ram), int(p[2])
		p = p[3:]
		n = min(n, len(p))
		copy(ram[gpa:], p[:n])
		p = p[n:]
	}
}

// Patches encodes ram's non-zero bytes for LoadPatches (over zeroed ram):
// how seeds built as memory images become fuzz inputs. ram must be at most
// 64 KiB, the reach of a patch's address.
func Patches(ram []byte) []byte {
	var out []byte
	for i := 0; i < len(ram); {
		if ram[i] == 0 {
			i++
			continue
		}
		end := i
		for zeros := 0; end < len(ram) && end-i < 255 && zeros < 8; end++ {
			if ram[end] == 0 {
				zeros++
			} else {
				zeros = 0
			}
		}
		end = i + len(bytes.TrimRight(ram[i:end], "\x00"))
		out = binary.LittleEndian.AppendUint16(out, uint16(i))
		out = append(out, byte(end-i))
		out = append(out, ram[i:end]...)
		i = end
	}
	return out
}

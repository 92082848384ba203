package virtiotest

import (
	"bytes"
)

// LoadPatches fills ram from a fuzz input's patches: each is a 3-byte
// little-endian guest physical address (modulo len(ram)), a length byte n
// and n bytes (cut at
// the end of the input and of ram). Later patches overwrite earlier ones;
// ram no patch covers keeps what it held.
//
// Fuzz targets take guest memory as patches rather than as a raw image: a
// ring's pages as a raw image make inputs of tens of kilobytes, and Go's
// minimizer, which runs an input about once per byte, then spends the
// fuzzing time minimizing instead of exploring.
func LoadPatches(ram, p []byte) {
	for len(p) >= 4 {
		gpa, n := (int(p[0])|int(p[1])<<8|int(p[2])<<16)%len(ram), int(p[3])
		p = p[4:]
		n = min(n, len(p))
		copy(ram[gpa:], p[:n])
		p = p[n:]
	}
}

// Patches encodes ram's non-zero bytes for LoadPatches (over zeroed ram):
// how seeds built as memory images become fuzz inputs. ram must be at most
// 16 MiB, the reach of a patch's address.
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
		out = append(out, byte(i), byte(i>>8), byte(i>>16), byte(end-i))
		out = append(out, ram[i:end]...)
		i = end
	}
	return out
}

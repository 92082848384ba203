package decompress

import (
	"encoding/binary"
	"fmt"

	"github.com/pierrec/lz4/v4"
)

// The kernel's lz4 payload ("lz4 -l", scripts/Makefile.lib) uses the legacy
// LZ4 frame, not the modern one: the magic 0x184C2102, then blocks, each a
// little-endian 32-bit compressed length followed by one LZ4 block that
// decompresses to at most 8 MiB. Every block but the last decompresses to
// exactly 8 MiB. lib/decompressors/unlz4.c also skips a repeated magic
// (concatenated frames), which we accept too.

const (
	lz4LegacyMagic     = 0x184c2102
	lz4LegacyBlockSize = 8 << 20
)

func unlz4Legacy(stream []byte, limit int64) ([]byte, error) {
	if len(stream) < 4 || binary.LittleEndian.Uint32(stream) != lz4LegacyMagic {
		return nil, fmt.Errorf("lz4 legacy magic missing: %w", ErrCorrupt)
	}
	p := stream[4:]
	var out []byte
	block := make([]byte, lz4LegacyBlockSize)
	for len(p) > 0 {
		if len(p) < 4 {
			return nil, fmt.Errorf("lz4 block length truncated: %w", ErrCorrupt)
		}
		n := binary.LittleEndian.Uint32(p)
		p = p[4:]
		if n == lz4LegacyMagic {
			continue
		}
		if n == 0 || uint64(n) > uint64(len(p)) {
			return nil, fmt.Errorf("lz4 block of %d bytes, %d left: %w", n, len(p), ErrCorrupt)
		}
		got, err := lz4.UncompressBlock(p[:n], block)
		if err != nil {
			return nil, fmt.Errorf("%w: lz4 block: %v", ErrCorrupt, err)
		}
		p = p[n:]
		if int64(len(out))+int64(got) > limit {
			return nil, fmt.Errorf("more than %d bytes: %w", limit, ErrTooLarge)
		}
		out = append(out, block[:got]...)
	}
	return out, nil
}

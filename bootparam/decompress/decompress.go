// Package decompress unpacks the compressed payload of a Linux bzImage on the
// host, so that a guest whose early code runs in an emulator (see HOST.md)
// never has to run the kernel's own decompressor.
//
// The payload layout is the one arch/x86/boot/compressed/Makefile and
// scripts/Makefile.lib produce: one compressed stream, followed - for every
// format except gzip, whose own trailer already carries ISIZE - by the
// uncompressed size as a 4-byte little-endian number ("size_append").
// Formats are told apart by their magic bytes, as lib/decompress.c does.
package decompress

import (
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz/lzma"
)

// Format names a compression format by the name the kernel's Kconfig uses.
type Format string

// The formats a bzImage payload can be in (CONFIG_KERNEL_*).
const (
	Unknown Format = ""
	Gzip    Format = "gzip"
	Bzip2   Format = "bzip2"
	LZMA    Format = "lzma"
	XZ      Format = "xz"
	LZO     Format = "lzo"
	LZ4     Format = "lz4"
	Zstd    Format = "zstd"
)

// DefaultLimit caps the decompressed size. Distribution kernels decompress
// to well under 100 MiB; the cap keeps a hostile image from exhausting host
// memory.
const DefaultLimit = 512 << 20

// Errors returned by Payload, always wrapped with context.
var (
	ErrUnknownFormat = errors.New("decompress: unknown compression format")
	ErrUnsupported   = errors.New("decompress: compression format not supported")
	ErrTooLarge      = errors.New("decompress: decompressed size exceeds limit")
	ErrCorrupt       = errors.New("decompress: corrupt compressed data")
)

// Detect names the format of data by its leading magic bytes, or returns
// Unknown. The magics are the ones lib/decompress.c matches on.
func Detect(data []byte) Format {
	switch {
	case hasPrefix(data, 0x1f, 0x8b), hasPrefix(data, 0x1f, 0x9e):
		return Gzip
	case hasPrefix(data, 'B', 'Z', 'h'):
		return Bzip2
	case hasPrefix(data, 0xfd, '7', 'z', 'X', 'Z', 0x00):
		return XZ
	case hasPrefix(data, 0x89, 'L', 'Z', 'O'):
		return LZO
	case hasPrefix(data, 0x02, 0x21, 0x4c, 0x18):
		return LZ4
	case hasPrefix(data, 0x28, 0xb5, 0x2f, 0xfd):
		return Zstd
	// The .lzma "alone" header has no magic; its first bytes are the
	// properties byte (lc=3 lp=0 pb=2 -> 0x5d) and the low byte of the
	// dictionary size, which the kernel also relies on.
	case hasPrefix(data, 0x5d, 0x00):
		return LZMA
	}
	return Unknown
}

func hasPrefix(data []byte, magic ...byte) bool {
	return bytes.HasPrefix(data, magic)
}

// Payload decompresses a bzImage payload. limit caps the output size in
// bytes (0 means DefaultLimit). It returns the decompressed bytes and the
// detected format.
func Payload(payload []byte, limit int64) ([]byte, Format, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	f := Detect(payload)
	stream, want := payload, int64(-1)
	if f != Gzip && f != Unknown {
		// size_append: the last four bytes are the uncompressed size.
		// Check it first so an absurd claim is rejected before any work.
		if len(payload) < 4 {
			return nil, f, fmt.Errorf("%s payload of %d bytes has no size trailer: %w", f, len(payload), ErrCorrupt)
		}
		stream = payload[:len(payload)-4]
		want = int64(binary.LittleEndian.Uint32(payload[len(payload)-4:]))
		if want > limit {
			return nil, f, fmt.Errorf("%s payload claims %d bytes, limit %d: %w", f, want, limit, ErrTooLarge)
		}
		// Output beyond the claimed size is an error anyway; capping
		// there also bounds dictionary and window allocations.
		limit = want
	}
	var (
		out []byte
		err error
	)
	switch f {
	case Gzip:
		out, err = gunzip(stream, limit)
	case Bzip2:
		out, err = readAll(bzip2.NewReader(bytes.NewReader(stream)), limit)
	case LZMA:
		out, err = unlzma(stream, limit)
	case XZ:
		out, err = unxz(stream, limit)
	case LZ4:
		out, err = unlz4Legacy(stream, limit)
	case Zstd:
		out, err = unzstd(stream, limit)
	case LZO:
		// LZO is rare on x86 distributions and has no maintained Go
		// decoder among our dependencies; the caller falls back to the
		// kernel's own decompressor.
		return nil, f, fmt.Errorf("lzo payload: %w", ErrUnsupported)
	default:
		head := payload
		if len(head) > 6 {
			head = head[:6]
		}
		return nil, f, fmt.Errorf("payload starts with % x: %w", head, ErrUnknownFormat)
	}
	if want >= 0 && errors.Is(err, ErrTooLarge) {
		return nil, f, fmt.Errorf("%s payload decompresses to more than the %d bytes its size trailer says: %w", f, want, ErrCorrupt)
	}
	if err != nil {
		return nil, f, fmt.Errorf("%s payload: %w", f, err)
	}
	if want >= 0 && int64(len(out)) != want {
		return nil, f, fmt.Errorf("%s payload decompressed to %d bytes, size trailer says %d: %w", f, len(out), want, ErrCorrupt)
	}
	return out, f, nil
}

// readAll reads r to EOF, failing with ErrTooLarge past limit bytes and
// turning decoder errors into ErrCorrupt.
func readAll(r io.Reader, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if n > limit {
		return nil, fmt.Errorf("more than %d bytes: %w", limit, ErrTooLarge)
	}
	return buf.Bytes(), nil
}

func gunzip(stream []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(stream))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	// One member only: anything after it is not part of the kernel.
	zr.Multistream(false)
	return readAll(zr, limit)
}

func unlzma(stream []byte, limit int64) ([]byte, error) {
	const hdrLen = 13 // properties, dictionary size (LE32), size (LE64)
	if len(stream) < hdrLen {
		return nil, fmt.Errorf("lzma header truncated: %w", ErrCorrupt)
	}
	// A match can never reach back further than the output produced so
	// far, so a dictionary larger than the output limit is never used:
	// shrink the header's claim in a copy, which bounds the allocation
	// (the reader insists that DictCap covers the header's value).
	hdr := append([]byte(nil), stream[:hdrLen]...)
	dict := int64(binary.LittleEndian.Uint32(hdr[1:]))
	dict = max(min(dict, limit), lzma.MinDictCap)
	binary.LittleEndian.PutUint32(hdr[1:], uint32(dict))
	cfg := lzma.ReaderConfig{DictCap: int(dict)}
	r, err := cfg.NewReader(io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(stream[hdrLen:])))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return readAll(r, limit)
}

func unzstd(stream []byte, limit int64) ([]byte, error) {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(uint64(limit)),
		zstd.WithDecoderMaxWindow(uint64(max(min(limit, zstd.MaxWindowSize), zstd.MinWindowSize))))
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %v", err)
	}
	defer d.Close()
	out, err := d.DecodeAll(stream, nil)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return nil, fmt.Errorf("more than %d bytes: %w", limit, ErrTooLarge)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("more than %d bytes: %w", limit, ErrTooLarge)
	}
	return out, nil
}

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

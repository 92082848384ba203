package decompress

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"

	"github.com/ulikunitz/xz/lzma"
)

// The .xz container is parsed here rather than by github.com/ulikunitz/xz
// because that package only knows the LZMA2 filter, while the kernel packs
// its payload with "xz --x86 --lzma2" (scripts/xz_wrap.sh): an x86 BCJ filter
// in front of LZMA2. We parse the stream and block headers (the .xz file
// format specification, sections 2.1 and 3), run LZMA2 through
// github.com/ulikunitz/xz/lzma, undo the BCJ filter and verify the block
// check, which covers the data after all filters were undone.

const (
	xzHeaderLen   = 12
	xzFilterX86   = 0x04
	xzFilterLZMA2 = 0x21
	xzMaxFilters  = 4
)

var crc64Table = crc64.MakeTable(crc64.ECMA)

// xzCheckSize is the size of the check field for each check type
// (specification section 2.1.1.2: types come in groups of three).
func xzCheckSize(t byte) int {
	if t == 0 {
		return 0
	}
	return 4 << ((t - 1) / 3)
}

func xzHash(t byte) hash.Hash {
	switch t {
	case 0x01:
		return crc32.NewIEEE()
	case 0x04:
		return crc64.New(crc64Table)
	case 0x0a:
		return sha256.New()
	}
	return nil // reserved check types: skipped, as the specification allows
}

func unxz(stream []byte, limit int64) ([]byte, error) {
	if len(stream) < 2*xzHeaderLen {
		return nil, fmt.Errorf("xz stream of %d bytes is too short: %w", len(stream), ErrCorrupt)
	}
	flags := stream[6:8]
	if crc32.ChecksumIEEE(flags) != binary.LittleEndian.Uint32(stream[8:12]) {
		return nil, fmt.Errorf("xz stream header CRC mismatch: %w", ErrCorrupt)
	}
	if flags[0] != 0 || flags[1] > 0x0f {
		return nil, fmt.Errorf("xz stream flags % x: %w", flags, ErrCorrupt)
	}
	if !bytes.HasSuffix(stream, []byte("YZ")) {
		// The footer must end the stream: the kernel writes one stream
		// and nothing after it except the size trailer we already cut.
		return nil, fmt.Errorf("xz stream footer magic missing: %w", ErrCorrupt)
	}
	check := flags[1]
	var out []byte
	pos := xzHeaderLen
	for {
		if pos >= len(stream) {
			return nil, fmt.Errorf("xz stream ends before its index: %w", ErrCorrupt)
		}
		if stream[pos] == 0 {
			// Index indicator: all blocks are done. The index only
			// repeats sizes that the block checks and the kernel's
			// size trailer already vouch for.
			return out, nil
		}
		data, n, err := xzBlock(stream[pos:], check, limit-int64(len(out)))
		if err != nil {
			return nil, fmt.Errorf("xz block at offset %d: %w", pos, err)
		}
		out = append(out, data...)
		pos += n
	}
}

// xzBlockHeader is what a block header says about how to decode the block.
type xzBlockHeader struct {
	compressed, uncompressed int64 // -1 when absent
	dictSize                 int64
	x86                      bool
	x86Start                 uint32
}

// xzBlock decodes one block at the start of b and returns its data and the
// number of bytes it took, including padding and check.
func xzBlock(b []byte, check byte, limit int64) ([]byte, int, error) {
	hdrLen := (int(b[0]) + 1) * 4
	if hdrLen > len(b) {
		return nil, 0, fmt.Errorf("block header of %d bytes exceeds the stream: %w", hdrLen, ErrCorrupt)
	}
	h, err := parseXZBlockHeader(b[:hdrLen])
	if err != nil {
		return nil, 0, err
	}
	body := b[hdrLen:]
	if h.compressed >= 0 {
		if h.compressed > int64(len(body)) {
			return nil, 0, fmt.Errorf("block claims %d compressed bytes, %d left: %w", h.compressed, len(body), ErrCorrupt)
		}
		body = body[:h.compressed]
	}
	if h.uncompressed > limit {
		return nil, 0, fmt.Errorf("block claims %d bytes, %d allowed: %w", h.uncompressed, limit, ErrTooLarge)
	}
	// A dictionary larger than the output can never be referenced, so
	// the allocation is bounded by the output limit whatever the header
	// claims.
	dict := max(min(h.dictSize, limit), lzma.MinDictCap)
	br := bytes.NewReader(body)
	r, err := lzma.Reader2Config{DictCap: int(dict)}.NewReader2(br)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: lzma2: %v", ErrCorrupt, err)
	}
	data, err := readAll(r, limit)
	if err != nil {
		return nil, 0, err
	}
	// lzma.Reader2 consumes exactly the chunks up to the end marker from
	// a bytes.Reader, so what is left tells where the data ended.
	used := len(body) - br.Len()
	if h.compressed >= 0 && int64(used) != h.compressed {
		return nil, 0, fmt.Errorf("block used %d compressed bytes, header says %d: %w", used, h.compressed, ErrCorrupt)
	}
	if h.uncompressed >= 0 && int64(len(data)) != h.uncompressed {
		return nil, 0, fmt.Errorf("block gave %d bytes, header says %d: %w", len(data), h.uncompressed, ErrCorrupt)
	}
	if h.x86 {
		bcjX86Decode(data, h.x86Start)
	}
	n := hdrLen + used
	for n%4 != 0 {
		if n >= len(b) || b[n] != 0 {
			return nil, 0, fmt.Errorf("bad block padding: %w", ErrCorrupt)
		}
		n++
	}
	cs := xzCheckSize(check)
	if n+cs > len(b) {
		return nil, 0, fmt.Errorf("block check truncated: %w", ErrCorrupt)
	}
	if hh := xzHash(check); hh != nil {
		hh.Write(data)
		sum := hh.Sum(nil)
		if check != 0x0a {
			// CRC32 and CRC64 are stored little-endian; Sum gives
			// big-endian.
			for i, j := 0, len(sum)-1; i < j; i, j = i+1, j-1 {
				sum[i], sum[j] = sum[j], sum[i]
			}
		}
		if !bytes.Equal(sum, b[n:n+cs]) {
			return nil, 0, fmt.Errorf("block check mismatch (check type %#x): %w", check, ErrCorrupt)
		}
	}
	return data, n + cs, nil
}

// parseXZBlockHeader decodes a block header (specification section 3.1).
func parseXZBlockHeader(hdr []byte) (*xzBlockHeader, error) {
	n := len(hdr)
	if crc32.ChecksumIEEE(hdr[:n-4]) != binary.LittleEndian.Uint32(hdr[n-4:]) {
		return nil, fmt.Errorf("block header CRC mismatch: %w", ErrCorrupt)
	}
	flags := hdr[1]
	if flags&0x3c != 0 {
		return nil, fmt.Errorf("block header reserved flags %#x: %w", flags, ErrCorrupt)
	}
	h := &xzBlockHeader{compressed: -1, uncompressed: -1}
	p := vliReader{b: hdr[2 : n-4]}
	if flags&0x40 != 0 {
		h.compressed = int64(p.next())
	}
	if flags&0x80 != 0 {
		h.uncompressed = int64(p.next())
	}
	nf := int(flags&3) + 1
	for i := 0; i < nf; i++ {
		id, size := p.next(), p.next()
		if p.err || size > uint64(len(p.b)) {
			return nil, fmt.Errorf("block header filter flags: %w", ErrCorrupt)
		}
		props := p.b[:size]
		p.b = p.b[size:]
		last := i == nf-1
		switch {
		case id == xzFilterLZMA2 && last && len(props) == 1:
			d := props[0] & 0x3f
			if d > 40 {
				return nil, fmt.Errorf("lzma2 dictionary property %d: %w", d, ErrCorrupt)
			}
			if d == 40 {
				h.dictSize = 0xffffffff
			} else {
				h.dictSize = int64(2|d&1) << (d/2 + 11)
			}
		case id == xzFilterX86 && !last && !h.x86 && (len(props) == 0 || len(props) == 4):
			h.x86 = true
			if len(props) == 4 {
				h.x86Start = binary.LittleEndian.Uint32(props)
			}
		default:
			return nil, fmt.Errorf("xz filter %#x (position %d of %d): %w", id, i+1, nf, ErrUnsupported)
		}
	}
	if p.err || h.compressed == 0 || h.compressed > 1<<62 || h.uncompressed > 1<<62 {
		return nil, fmt.Errorf("block header sizes: %w", ErrCorrupt)
	}
	for _, c := range p.b {
		if c != 0 {
			return nil, fmt.Errorf("block header padding not zero: %w", ErrCorrupt)
		}
	}
	return h, nil
}

// vliReader reads the .xz variable-length integers (specification section
// 1.2): 7 bits per byte, least significant first, at most 9 bytes.
type vliReader struct {
	b   []byte
	err bool
}

func (v *vliReader) next() uint64 {
	var x uint64
	for i := 0; i < 9; i++ {
		if len(v.b) == 0 {
			v.err = true
			return 0
		}
		c := v.b[0]
		v.b = v.b[1:]
		x |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if c == 0 && i > 0 {
				v.err = true // not the shortest encoding
			}
			return x
		}
	}
	v.err = true
	return 0
}

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

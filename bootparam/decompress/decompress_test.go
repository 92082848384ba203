package decompress

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"
)

// x86ish makes deterministic data that looks like x86 code to the BCJ
// filter: many E8/E9 opcodes with small signed rel32 operands. The vectors
// in testdata/ were compressed from x86ish(1<<16) (see testdata/README).
func x86ish(n int) []byte {
	b := make([]byte, n)
	x := uint32(12345)
	next := func() uint32 { x = x*1103515245 + 12345; return x >> 8 }
	for i := 0; i < n; {
		switch r := next() % 8; {
		case r < 3 && i+5 <= n:
			b[i] = 0xe8 + byte(r&1)
			v := next() % 0x4000
			if next()%2 == 0 {
				v = -v
			}
			b[i+1], b[i+2], b[i+3], b[i+4] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
			i += 5
		default:
			b[i] = byte(next() % 16)
			i++
		}
	}
	return b
}

// withSize appends the kernel's size_append trailer.
func withSize(stream []byte, n int) []byte {
	return binary.LittleEndian.AppendUint32(append([]byte(nil), stream...), uint32(n))
}

func gzipData(t testing.TB, in []byte) []byte {
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	w.Write(in)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func xzData(t testing.TB, in []byte) []byte {
	var b bytes.Buffer
	w, err := xz.NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(in)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return withSize(b.Bytes(), len(in))
}

func lzmaData(t testing.TB, in []byte) []byte {
	var b bytes.Buffer
	w, err := lzma.NewWriter(&b)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(in)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return withSize(b.Bytes(), len(in))
}

func zstdData(t testing.TB, in []byte) []byte {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return withSize(e.EncodeAll(in, nil), len(in))
}

// lz4LegacyData builds the legacy frame the way "lz4 -l" does: 8 MiB
// input blocks, each stored as length + LZ4 block.
func lz4LegacyData(t testing.TB, in []byte) []byte {
	out := binary.LittleEndian.AppendUint32(nil, lz4LegacyMagic)
	var c lz4.Compressor
	for p := in; len(p) > 0; {
		n := min(len(p), lz4LegacyBlockSize)
		blk := make([]byte, lz4.CompressBlockBound(n))
		m, err := c.CompressBlock(p[:n], blk)
		if err != nil || m == 0 {
			t.Fatalf("CompressBlock: %d, %v", m, err)
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(m))
		out = append(out, blk[:m]...)
		p = p[n:]
	}
	return withSize(out, len(in))
}

func readVector(t testing.TB, name string, n int) []byte {
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return withSize(b, n)
}

func TestPayloadRoundTrip(t *testing.T) {
	small := x86ish(1 << 16)
	// Larger than one legacy lz4 block, so the multi-block path runs.
	big := bytes.Repeat([]byte("govm bootparam decompress test line\n"), (9<<20)/36)
	tests := []struct {
		name string
		in   []byte
		make func(testing.TB, []byte) []byte
		want Format
	}{
		{"gzip", small, gzipData, Gzip},
		{"xz", small, xzData, XZ},
		{"lzma", small, lzmaData, LZMA},
		{"zstd", small, zstdData, Zstd},
		{"lz4 one block", small, lz4LegacyData, LZ4},
		{"lz4 two blocks", big, lz4LegacyData, LZ4},
		{"bzip2 vector", small, func(t testing.TB, in []byte) []byte { return readVector(t, "x86ish.bz2", len(in)) }, Bzip2},
		{"lz4 -l vector", small, func(t testing.TB, in []byte) []byte { return readVector(t, "x86ish.lz4", len(in)) }, LZ4},
		{"xz --x86 vector", small, func(t testing.TB, in []byte) []byte { return readVector(t, "x86-bcj.xz", len(in)) }, XZ},
		{"xz --x86=start=4096 crc64 vector", small, func(t testing.TB, in []byte) []byte { return readVector(t, "x86-bcj-start4096.xz", len(in)) }, XZ},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			payload := tc.make(t, tc.in)
			if f := Detect(payload); f != tc.want {
				t.Fatalf("Detect = %q, want %q", f, tc.want)
			}
			out, f, err := Payload(payload, 0)
			if err != nil {
				t.Fatalf("Payload: %v", err)
			}
			if f != tc.want {
				t.Errorf("format %q, want %q", f, tc.want)
			}
			if !bytes.Equal(out, tc.in) {
				t.Fatalf("output differs: got %d bytes, want %d", len(out), len(tc.in))
			}
		})
	}
}

func TestPayloadErrors(t *testing.T) {
	in := x86ish(1 << 14)
	xzp := xzData(t, in)
	badCheck := append([]byte(nil), readVector(t, "x86-bcj.xz", 1<<16)...)
	// A flipped byte inside the LZMA2 data: either LZMA2 itself or the
	// block's CRC32 over the BCJ-decoded output must notice.
	badCheck[len(badCheck)/2] ^= 0x55
	tests := []struct {
		name    string
		payload []byte
		limit   int64
		want    error
	}{
		{"unknown magic", []byte("this is not compressed"), 0, ErrUnknownFormat},
		{"empty", nil, 0, ErrUnknownFormat},
		{"lzo", withSize([]byte{0x89, 'L', 'Z', 'O', 0, 0x0d, 0x0a}, 10), 0, ErrUnsupported},
		{"size trailer over limit", xzp, 1000, ErrTooLarge},
		{"gzip output over limit", gzipData(t, in), 1000, ErrTooLarge},
		{"zstd output beyond its size trailer", func() []byte { p := zstdData(t, in); return withSize(p[:len(p)-4], 10) }(), 1000, ErrCorrupt},
		{"lzma output beyond its size trailer", func() []byte { p := lzmaData(t, in); return withSize(p[:len(p)-4], 100) }(), 0, ErrCorrupt},
		{"size trailer wrong", withSize(xzp[:len(xzp)-4], len(in)-1), 0, ErrCorrupt},
		{"xz truncated", withSize(xzp[:len(xzp)/2], len(in)), 0, ErrCorrupt},
		{"xz corrupt middle", badCheck, 0, ErrCorrupt},
		{"gzip truncated", gzipData(t, in)[:100], 0, ErrCorrupt},
		{"lz4 block length beyond data", withSize([]byte{0x02, 0x21, 0x4c, 0x18, 0xff, 0xff, 0, 0, 1}, 10), 0, ErrCorrupt},
		{"no size trailer", []byte("BZh"), 0, ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := Payload(tc.payload, tc.limit)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if out != nil {
				t.Errorf("got %d bytes of output with an error", len(out))
			}
		})
	}
}

func TestBCJChangesX86ishData(t *testing.T) {
	// The generated vector must exercise the filter: decoding it as if it
	// were filtered has to rewrite many operands, or the CLI vectors above
	// would prove nothing about bcjX86Decode.
	in := x86ish(1 << 16)
	dec := append([]byte(nil), in...)
	bcjX86Decode(dec, 0)
	changed := 0
	for i := range in {
		if in[i] != dec[i] {
			changed++
		}
	}
	if changed < 1000 {
		t.Fatalf("only %d bytes changed", changed)
	}
	// Fewer than five bytes hold no whole instruction: left untouched.
	short := []byte{0xe8, 1, 0, 0}
	bcjX86Decode(short, 0)
	if !bytes.Equal(short, []byte{0xe8, 1, 0, 0}) {
		t.Fatalf("short buffer changed: % x", short)
	}
}

func FuzzPayload(f *testing.F) {
	in := x86ish(4096)
	f.Add(gzipData(f, in))
	f.Add(xzData(f, in))
	f.Add(lzmaData(f, in))
	f.Add(lz4LegacyData(f, in))
	f.Add(zstdData(f, in))
	if b, err := os.ReadFile("testdata/x86-bcj.xz"); err == nil {
		f.Add(withSize(b, 1<<16))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		const limit = 1 << 20
		out, _, err := Payload(payload, limit)
		if err == nil && len(out) > limit {
			t.Fatalf("output %d bytes over limit %d", len(out), limit)
		}
	})
}

package virtioblk

import (
	"errors"
	"testing"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name               string
		hdr                []byte
		readable, writable uint64
		wantErr            bool
		status             uint8
		off, n             uint64
	}{
		{"read", header(TypeIn, 2), 16, 1025, false, StatusOK, 1024, 1024},
		{"write", header(TypeOut, 1), 16 + 512, 1, false, StatusOK, 512, 512},
		{"write last sector", header(TypeOut, 9), 16 + 512, 1, false, StatusOK, 9 * 512, 512},
		{"write past end", header(TypeOut, 9), 16 + 1024, 1, false, StatusIOErr, 0, 1024},
		{"read overflow", header(TypeIn, 1<<55), 16, 513, false, StatusIOErr, 0, 512},
		{"flush", header(TypeFlush, 77), 16, 1, false, StatusOK, 0, 0},
		{"unsupported", header(3, 0), 16, 1, false, StatusUnsupp, 0, 0},
		{"short header", header(TypeIn, 0)[:15], 15, 1, true, 0, 0, 0},
		{"no status", header(TypeIn, 0), 16, 0, true, 0, 0, 0},
	}
	for _, tt := range tests {
		r, err := parseRequest(tt.hdr, tt.readable, tt.writable, 10)
		if tt.wantErr {
			if !errors.Is(err, ErrBadRequest) {
				t.Errorf("%s: err %v, want ErrBadRequest", tt.name, err)
			}
			continue
		}
		if err != nil || r.status != tt.status || (r.status == StatusOK && (r.off != tt.off || r.n != tt.n)) {
			t.Errorf("%s: %+v, %v", tt.name, r, err)
		}
	}
}

// FuzzParseRequest: whatever the guest's header and chain shape, parsing
// never panics and an executable IN/OUT request stays inside the disk and
// matches the data part of the chain.
func FuzzParseRequest(f *testing.F) {
	f.Add(header(TypeIn, 0), uint64(16), uint64(513), uint64(8))
	f.Add(header(TypeOut, 7), uint64(16+512), uint64(1), uint64(8))
	f.Add(header(TypeIn, ^uint64(0)), uint64(16), uint64(513), uint64(^uint64(0)/512))
	f.Fuzz(func(t *testing.T, hdr []byte, readable, writable, capacity uint64) {
		r, err := parseRequest(hdr, readable, writable, capacity)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v not ErrBadRequest", err)
			}
			if readable >= HeaderLen && len(hdr) >= HeaderLen && writable >= 1 {
				t.Fatalf("well-framed request rejected: %v", err)
			}
			return
		}
		if r.status != StatusOK || (r.typ != TypeIn && r.typ != TypeOut) {
			return
		}
		if r.n%SectorSize != 0 || r.off/SectorSize != r.sector || r.off%SectorSize != 0 {
			t.Fatalf("misaligned %+v", r)
		}
		end := r.off + r.n
		if end < r.off || end/SectorSize > capacity {
			t.Fatalf("%+v outside %d sectors", r, capacity)
		}
		if (r.typ == TypeIn && r.n != writable-1) || (r.typ == TypeOut && r.n != readable-HeaderLen) {
			t.Fatalf("%+v does not match chain %d/%d", r, readable, writable)
		}
	})
}

package virtioblk

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Request types and status values (spec 5.2.6).
const (
	TypeIn    = 0
	TypeOut   = 1
	TypeFlush = 4
	TypeGetID = 8

	StatusOK     = 0
	StatusIOErr  = 1
	StatusUnsupp = 2
)

// HeaderLen is the device-readable header: le32 type, le32 reserved (ioprio
// in legacy), le64 sector (spec 5.2.6).
const HeaderLen = 16

// request is a parsed, validated request: what the I/O side executes.
type request struct {
	typ    uint32
	sector uint64
	// off and n are the byte range on the disk for IN and OUT.
	off, n uint64
	// status is StatusOK when the request must be executed; otherwise it
	// is the answer, decided without touching the backend.
	status uint8
}

// parseRequest validates a request's framing and header against the disk
// capacity (spec 5.2.6). The guest's header is hdr (HeaderLen bytes),
// readable and writable are the chain's part lengths. It returns an error
// only for framing that leaves no way to answer: a short header or no room
// for the status byte. Everything else is answered with a status.
func parseRequest(hdr []byte, readable, writable, capacity uint64) (request, error) {
	if readable < HeaderLen || len(hdr) < HeaderLen {
		return request{}, fmt.Errorf("%w: header of %d bytes, want %d", ErrBadRequest, readable, HeaderLen)
	}
	if writable < 1 {
		// Spec 5.2.6: the status byte is the last device-writable byte.
		return request{}, fmt.Errorf("%w: no device-writable status byte", ErrBadRequest)
	}
	r := request{
		typ:    binary.LittleEndian.Uint32(hdr[0:]),
		sector: binary.LittleEndian.Uint64(hdr[8:]),
	}
	switch r.typ {
	case TypeIn:
		r.n = writable - 1 // data, then the status byte
	case TypeOut:
		r.n = readable - HeaderLen // header, then the data
	case TypeFlush, TypeGetID:
		return r, nil
	default:
		r.status = StatusUnsupp
		return r, nil
	}
	// Data moves in whole sectors (spec 5.2.6.1); a range past the end of
	// the disk, or one whose end overflows, fails before any I/O. The
	// byte offset must fit an int64 file offset too (New bounds capacity
	// that way; checked again here because the sector is the guest's).
	capacity = min(capacity, math.MaxInt64/SectorSize)
	if r.n%SectorSize != 0 || r.sector > capacity || r.n/SectorSize > capacity-r.sector {
		r.status = StatusIOErr
		return r, nil
	}
	r.off = r.sector * SectorSize
	return r, nil
}

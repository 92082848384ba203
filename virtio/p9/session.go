package virtio9p

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hugelgupf/p9/p9"
)

// The device's 9P connection outlives a reset. A driver's reset forgets its
// fids (Linux's trans_virtio has no way to clunk them afterwards), but the
// server holds them, and with them the share's open host files. So the
// device keeps the fids the guest holds, and when the I/O goroutine stops
// it clunks each on the guest's behalf; the next activation goes on over
// the same connection, with a fid table as empty as a new one's.
//
// Why not a fresh connection per activation: ending the old one means
// closing it, and the server's connection shutdown races its own request
// goroutines (hugelgupf/p9 v0.3.0: connState.stop waits on a WaitGroup
// that a request goroutine, looping back for the next message, may Add to
// after the count reached zero; the panic would end govm). The server
// shuts a connection down on its own only when a read fails or a message
// is larger than the msize negotiated, and the device never sends it one
// (admit): a connection that is never closed never takes that path.
//
// The exceptions: a request cut off by the reset (the server did not
// answer within resetGrace: a share on a stalled host filesystem), and
// clunks that do not finish within clunkTimeout (the same stall, or a
// guest holding more fids than the device can clunk in that time; the
// bound keeps govm's exit, which resets every device, prompt). The
// connection is then out of step, and the device leaves it behind, parked
// on a pipe nobody writes, and starts a fresh one: that costs the old
// connection's goroutines and the files still open on it.

// 9P2000.L message types the device reads the fields of.
const (
	msgRlerror      = 7
	msgTversion     = 100
	msgRversion     = 101
	msgTauth        = 102
	msgTattach      = 104
	msgTwalk        = 110
	msgTclunk       = 120
	msgTremove      = 122
	msgTwalkgetattr = 126 // hugelgupf/p9's extension: Twalk's layout
)

// minMsize is the smallest msize the device lets a guest negotiate:
// Linux's client refuses a server's below it, and with less, a later
// Tversion (or the device's own Tclunk) might not fit.
const minMsize = 4096

const (
	// resetGrace bounds the wait for the answer to a request in flight
	// when the device is reset.
	resetGrace = 500 * time.Millisecond
	// clunkTimeout bounds the clunks after a reset, all together.
	clunkTimeout = time.Second
)

// session is the device's connection to the 9P server and the fids the
// guest holds on it. Only the I/O goroutine uses it while one runs, and
// Activate and Reset are not concurrent with it (virtio.Worker).
type session struct {
	conn net.Conn // the device's end; nil: none yet
	fids map[uint32]struct{}
	// msize is the message size the server accepts, as its last
	// Rversion gave it; 0: not negotiated (maxMessage bounds).
	msize uint32
	// broken: a request or a clunk was cut off, the connection is out of
	// step; the next activation starts a fresh one.
	broken bool
}

// open returns the connection, starting one (and its server) if there is
// none or the last one is broken.
func (s *session) open(attach p9.Attacher) net.Conn {
	if s.conn == nil || s.broken {
		dev, srv := net.Pipe()
		go p9.NewServer(attach).Handle(srv, srv)
		s.conn, s.fids, s.msize, s.broken = dev, map[uint32]struct{}{}, 0, false
	}
	s.conn.SetDeadline(time.Time{})
	return s.conn
}

// fidsEnd is how much of a T-message track reads: up to Twalk's newfid.
const fidsEnd = 15

// admit reports whether the server takes the T-message m (whole, at least
// a header) within the msize negotiated. A Tversion asking for less than
// minMsize is raised to it in m.
func (s *session) admit(m []byte) bool {
	if m[4] == msgTversion && len(m) >= 11 && binary.LittleEndian.Uint32(m[7:]) < minMsize {
		binary.LittleEndian.PutUint32(m[7:], minMsize)
	}
	return s.msize == 0 || uint32(len(m)) <= s.msize
}

// track notes the fids the T-message t (at least its header; track reads
// no further than fidsEnd) created or released, and the msize an Rversion
// set, given the server's answer r (at least a header). A walk creates its
// newfid only if it answers Rwalk (hugelgupf/p9 fails a walk that stops
// short). Tclunk and Tremove release their fid whatever the answer (9P:
// the fid is clunked even if the remove fails).
func (s *session) track(t, r []byte) {
	fidAt := func(off int) (uint32, bool) {
		if len(t) < off+4 {
			return 0, false
		}
		return binary.LittleEndian.Uint32(t[off:]), true
	}
	switch t[4] {
	case msgTclunk, msgTremove:
		if fid, ok := fidAt(7); ok {
			delete(s.fids, fid)
		}
	case msgTattach, msgTauth:
		if fid, ok := fidAt(7); ok && r[4] != msgRlerror {
			s.fids[fid] = struct{}{}
		}
	case msgTwalk, msgTwalkgetattr:
		if fid, ok := fidAt(11); ok && r[4] != msgRlerror {
			s.fids[fid] = struct{}{}
		}
	case msgTversion:
		// An Rversion of msize 0 ("unknown") leaves it as it was.
		if r[4] == msgRversion && len(r) >= 11 {
			if m := binary.LittleEndian.Uint32(r[7:]); m != 0 {
				s.msize = m
			}
		}
	}
}

// clunkAll clunks every fid the guest holds, as the device's own requests
// on the connection, and returns how many it clunked. A connection that
// fails or stalls meanwhile is marked broken (Stats counts it).
func (s *session) clunkAll() int {
	if s.conn == nil || s.broken || len(s.fids) == 0 {
		return 0
	}
	s.conn.SetDeadline(time.Now().Add(clunkTimeout))
	defer s.conn.SetDeadline(time.Time{})
	n := 0
	for fid := range s.fids {
		if s.clunk(fid) != nil {
			s.broken = true
			return n
		}
		delete(s.fids, fid)
		n++
	}
	return n
}

// clunk sends Tclunk fid and reads the answer, whatever it is.
func (s *session) clunk(fid uint32) error {
	m := binary.LittleEndian.AppendUint32(nil, 11)
	m = append(m, msgTclunk, 0, 0) // tag 0: nothing else is in flight
	m = binary.LittleEndian.AppendUint32(m, fid)
	if _, err := s.conn.Write(m); err != nil {
		return err
	}
	var hdr [7]byte
	if _, err := io.ReadFull(s.conn, hdr[:]); err != nil {
		return err
	}
	size := binary.LittleEndian.Uint32(hdr[:])
	if size < 7 || size > maxMessage+7 {
		return fmt.Errorf("the 9P server answered %d bytes", size)
	}
	_, err := io.CopyN(io.Discard, s.conn, int64(size-7))
	return err
}

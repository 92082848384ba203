package sharefs

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hugelgupf/p9/p9"
)

// FuzzNinePMessages feeds input-chosen 9P2000.L messages (each framed with
// its own size, as the virtio transport frames them) to hugelgupf/p9's
// server over a share, after a well-formed Tversion and Tattach. Whatever
// the messages, the server must not panic or hang, and nothing beside the
// share may change: the secret stays as it was and no file appears next to
// it. The input is a sequence of [len][type][tag 2][body len-3] records.
func FuzzNinePMessages(f *testing.F) {
	walk := func(tag uint16, fid, newfid uint32, names ...string) []byte {
		b := binary.LittleEndian.AppendUint16(nil, tag)
		b = binary.LittleEndian.AppendUint32(b, fid)
		b = binary.LittleEndian.AppendUint32(b, newfid)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(names)))
		for _, n := range names {
			b = binary.LittleEndian.AppendUint16(b, uint16(len(n)))
			b = append(b, n...)
		}
		return append([]byte{byte(len(b) + 1), 110}, b...) // Twalk
	}
	lcreate := func(tag uint16, fid uint32, name string) []byte {
		b := binary.LittleEndian.AppendUint16(nil, tag)
		b = binary.LittleEndian.AppendUint32(b, fid)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		b = binary.LittleEndian.AppendUint32(b, 0o2) // O_RDWR
		b = binary.LittleEndian.AppendUint32(b, 0o644)
		b = binary.LittleEndian.AppendUint32(b, 0)
		return append([]byte{byte(len(b) + 1), 14}, b...) // Tlcreate
	}
	f.Add(walk(1, 0, 1, "hello.txt"))
	f.Add(append(walk(1, 0, 1, "up", "secret"), lcreate(2, 1, "planted")...))
	f.Add(append(walk(1, 0, 1, "..", ".."), lcreate(2, 1, "x")...))
	f.Add(append(walk(1, 0, 1, "abs"), lcreate(2, 1, "y")...))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, _, secret := tree(t, false)
		// One message, then its answer, as the virtio transport does;
		// the connection is left open at the end (closing it races the
		// server's own goroutines: see virtio/p9's Activate).
		srvEnd, cliEnd := net.Pipe()
		go p9.NewServer(s).Handle(srvEnd, srvEnd)
		var hdr [7]byte
		send := func(typ byte, tag uint16, body []byte) {
			m := binary.LittleEndian.AppendUint32(nil, uint32(7+len(body)))
			m = append(m, typ)
			m = binary.LittleEndian.AppendUint16(m, tag)
			cliEnd.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := cliEnd.Write(append(m, body...)); err != nil {
				t.Fatalf("the server took no message: %v", err)
			}
			if _, err := io.ReadFull(cliEnd, hdr[:]); err != nil {
				t.Fatalf("no answer to message type %d: %v", typ, err)
			}
			io.CopyN(io.Discard, cliEnd, int64(binary.LittleEndian.Uint32(hdr[:]))-7)
		}
		// Tversion 9P2000.L msize 8192, Tattach fid 0 to the root.
		send(100, 0xffff, append(binary.LittleEndian.AppendUint32(nil, 8192), 8, 0, '9', 'P', '2', '0', '0', '0', '.', 'L'))
		send(104, 0, []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})
		for len(in) >= 4 {
			n := int(in[0])
			if n < 3 || n > len(in)-1 {
				break
			}
			rec := in[1 : 1+n]
			send(rec[0], binary.LittleEndian.Uint16(rec[1:3]), rec[3:])
			in = in[1+n:]
		}
		if b, err := os.ReadFile(filepath.Join(secret, "passwd")); string(b) != "secret" || err != nil {
			t.Fatalf("the secret changed: %q, %v", b, err)
		}
		ents, _ := os.ReadDir(filepath.Dir(secret))
		if len(ents) != 2 {
			t.Fatalf("beside the share: %v", ents)
		}
		if ents, _ := os.ReadDir(secret); len(ents) != 1 {
			t.Fatalf("in the secret directory: %v", ents)
		}
	})
}

package sharefs

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/hugelgupf/p9/p9"
)

// TestOverNinePServer: the share behind hugelgupf/p9's server answers that
// library's 9P2000.L client over a connection, as the guest's kernel will
// through the virtio transport: read a host file, write one the host then
// reads, and be refused a walk out through a symlink.
func TestOverNinePServer(t *testing.T) {
	s, share, _ := tree(t, false)
	// The connection is left open at the end: closing it races the
	// server's own goroutines (see virtio/p9's Activate).
	srvEnd, cliEnd := net.Pipe()
	go p9.NewServer(s).Handle(srvEnd, srvEnd)
	c, err := p9.NewClient(cliEnd)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Attach("/")
	if err != nil {
		t.Fatal(err)
	}
	_, hello, err := r.Walk([]string{"hello.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := hello.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := hello.ReadAt(buf, 0); string(buf[:n]) != "hi" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	_, d, _ := r.Walk(nil)
	nf, _, _, err := d.Create("guest.txt", p9.ReadWrite, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nf.WriteAt([]byte("written over 9p"), 0); err != nil {
		t.Fatal(err)
	}
	if err := nf.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(share, "guest.txt")); string(b) != "written over 9p" {
		t.Fatalf("host reads %q", b)
	}
	if _, _, err := r.Walk([]string{"abs", "passwd"}); err == nil {
		t.Fatal("walked out through a symlink over 9P")
	}
}

package sharefs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// tree makes a share and, beside it, a secret the guest must never reach:
//
//	share/hello.txt        "hi"
//	share/dir/inner.txt
//	share/up -> ..         (relative escape)
//	share/abs -> <secret dir> (absolute escape)
//	share/dir/deep -> ../../secret
//	secret/passwd          "secret"
func tree(t *testing.T, ro bool) (*Share, string, string) {
	t.Helper()
	base := t.TempDir()
	share, secret := filepath.Join(base, "share"), filepath.Join(base, "secret")
	for _, d := range []string{share, secret, filepath.Join(share, "dir")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, s := range map[string]string{filepath.Join(share, "hello.txt"): "hi", filepath.Join(share, "dir", "inner.txt"): "in",
		filepath.Join(secret, "passwd"): "secret"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for l, target := range map[string]string{filepath.Join(share, "up"): "..", filepath.Join(share, "abs"): secret,
		filepath.Join(share, "dir", "deep"): "../../secret"} {
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Config{Root: share, ReadOnly: ro})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, share, secret
}

func root(t *testing.T, s *Share) p9.File {
	t.Helper()
	f, err := s.Attach()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func readAll(t *testing.T, f p9.File) (string, error) {
	t.Helper()
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	return string(buf[:n]), err
}

// TestReadWrite: the ordinary uses work: walk, read, create and write,
// mkdir, rename, unlink, readdir, symlink and readlink.
func TestReadWrite(t *testing.T) {
	s, share, _ := tree(t, false)
	r := root(t, s)
	_, hello, err := r.Walk([]string{"hello.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(t, hello); got != "hi" || err != nil {
		t.Fatalf("hello.txt = %q, %v", got, err)
	}
	_, d, _ := r.Walk(nil)
	nf, _, _, err := d.Create("new.txt", p9.ReadWrite, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nf.WriteAt([]byte("from guest"), 0); err != nil {
		t.Fatal(err)
	}
	nf.Close()
	if b, _ := os.ReadFile(filepath.Join(share, "new.txt")); string(b) != "from guest" {
		t.Fatalf("host reads %q", b)
	}
	if _, err := r.Mkdir("sub", 0o755, 0, 0); err != nil {
		t.Fatal(err)
	}
	_, sub, _ := r.Walk([]string{"sub"})
	if err := r.RenameAt("new.txt", sub, "moved.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(share, "sub", "moved.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Symlink("hello.txt", "ln", 0, 0); err != nil {
		t.Fatal(err)
	}
	_, ln, _ := r.Walk([]string{"ln"})
	if target, err := ln.Readlink(); target != "hello.txt" || err != nil {
		t.Fatalf("readlink = %q, %v", target, err)
	}
	if err := sub.UnlinkAt("moved.txt", 0); err != nil {
		t.Fatal(err)
	}
	_, dd, _ := r.Walk(nil)
	if _, _, err := dd.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	ents, err := dd.Readdir(0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name] = true
	}
	for _, n := range []string{"hello.txt", "dir", "sub", "ln", "up", "abs"} {
		if !names[n] {
			t.Errorf("readdir lacks %s: %v", n, ents)
		}
	}
}

// TestNoEscape: nothing the guest can send reaches the secret beside the
// share: ".." stops at the root, symlinks (relative, absolute, in a
// subdirectory) are never followed, names with a slash are refused, and a
// directory the host swaps for a symlink after the walk is refused at its
// next use.
func TestNoEscape(t *testing.T) {
	s, share, secret := tree(t, false)
	r := root(t, s)
	// ".." at the root is the root.
	_, up, err := r.Walk([]string{"..", "..", "hello.txt"})
	if err != nil {
		t.Fatalf("walk ../../hello.txt: %v", err)
	}
	if got, _ := readAll(t, up); got != "hi" {
		t.Fatalf("../../hello.txt read %q, want the share's hello.txt", got)
	}
	if _, _, err := r.Walk([]string{"..", "secret", "passwd"}); err == nil {
		t.Fatal("walked ../secret/passwd")
	}
	for _, walk := range [][]string{{"up", "secret", "passwd"}, {"abs", "passwd"}, {"dir", "deep", "passwd"}, {"up", "share", "hello.txt"}} {
		if _, _, err := r.Walk(walk); err == nil {
			t.Errorf("walked through a symlink: %v", walk)
		}
	}
	// The symlinks themselves: walkable, readable as links, not openable.
	_, abs, err := r.Walk([]string{"abs"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := abs.Open(p9.ReadOnly); !errors.Is(err, linux.ELOOP) {
		t.Fatalf("open of a symlink = %v, want ELOOP", err)
	}
	if target, _ := abs.Readlink(); target != secret {
		t.Fatalf("readlink abs = %q", target)
	}
	for _, name := range []string{"../secret", "a/b", "", ".", "..", "x\x00y"} {
		if _, _, err := r.Walk([]string{name}); name != ".." && err == nil {
			t.Errorf("walked the name %q", name)
		}
		if _, _, _, err := r.Create(name, p9.ReadWrite, 0o644, 0, 0); err == nil {
			t.Errorf("created the name %q", name)
		}
		if _, err := r.Mkdir(name, 0o755, 0, 0); err == nil {
			t.Errorf("made the directory %q", name)
		}
	}
	// Create through an existing symlink: refused, nothing written there.
	if _, _, _, err := r.Create("abs", p9.ReadWrite, 0o644, 0, 0); err == nil {
		t.Fatal("created over a symlink")
	}
	// The host swaps dir for a symlink to the secret after the walk.
	_, dir, err := r.Walk([]string{"dir"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(share, "dir"), filepath.Join(share, "dir.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(share, "dir")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := dir.Walk([]string{"passwd"}); err == nil {
		t.Fatal("walked into a directory swapped for a symlink")
	}
	if _, _, _, err := dir.Create("planted", p9.ReadWrite, 0o644, 0, 0); err == nil {
		t.Fatal("created in a directory swapped for a symlink")
	}
	if err := dir.UnlinkAt("passwd", 0); err == nil {
		t.Fatal("unlinked in a directory swapped for a symlink")
	}
	if b, err := os.ReadFile(filepath.Join(secret, "passwd")); string(b) != "secret" || err != nil {
		t.Fatalf("the secret changed: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(secret, "planted")); err == nil {
		t.Fatal("a file was planted beside the share")
	}
	// No device nodes.
	if _, err := r.Mknod("null", p9.ModeCharacterDevice|0o666, 1, 3, 0, 0); err == nil {
		t.Fatal("made a device node")
	}
}

// TestReadOnly: a read-only share reads, and refuses every change with
// EROFS, leaving the tree as it was.
func TestReadOnly(t *testing.T) {
	s, share, _ := tree(t, true)
	r := root(t, s)
	_, hello, _ := r.Walk([]string{"hello.txt"})
	if got, err := readAll(t, hello); got != "hi" || err != nil {
		t.Fatalf("read = %q, %v", got, err)
	}
	_, w, _ := r.Walk([]string{"hello.txt"})
	if _, _, err := w.Open(p9.WriteOnly); !errors.Is(err, linux.EROFS) {
		t.Errorf("open for writing = %v, want EROFS", err)
	}
	if _, _, err := w.Open(p9.ReadOnly | p9.OpenFlags(0o1000)); !errors.Is(err, linux.EROFS) {
		t.Errorf("open with O_TRUNC = %v, want EROFS", err)
	}
	checks := map[string]error{}
	_, _, _, checks["create"] = r.Create("x", p9.ReadWrite, 0o644, 0, 0)
	_, checks["mkdir"] = r.Mkdir("x", 0o755, 0, 0)
	_, checks["symlink"] = r.Symlink("t", "x", 0, 0)
	checks["unlink"] = r.UnlinkAt("hello.txt", 0)
	checks["rename"] = r.RenameAt("hello.txt", r, "y")
	checks["setattr"] = hello.SetAttr(p9.SetAttrMask{Size: true}, p9.SetAttr{Size: 0})
	checks["link"] = r.Link(hello, "z")
	for op, err := range checks {
		if !errors.Is(err, linux.EROFS) {
			t.Errorf("%s = %v, want EROFS", op, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(share, "hello.txt")); string(b) != "hi" {
		t.Fatalf("hello.txt now %q", b)
	}
}

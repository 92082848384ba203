package initramfs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// extract unpacks archive with GNU cpio (the reference reader) into a new
// directory.
func extract(t *testing.T, archive []byte) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("cpio", "-idm", "--quiet", "--no-absolute-filenames")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -idm: %v\n%s", err, out)
	}
	return dir
}

func TestWriterCpioReadsIt(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, err := range []error{
		w.Dir("etc", 0o755),
		w.File("/etc/odd", 0o600, []byte("abc")), // lengths 1..4 mod 4 exercise the padding
		w.File("etc/four", 0o644, []byte("wxyz")),
		w.File("etc/empty", 0o644, nil),
		w.File("run.sh", 0o755, []byte("#!/bin/sh\necho hi\n")),
		w.Symlink("etc/link", "odd"),
		w.Close(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if buf.Len()%4 != 0 {
		t.Errorf("archive of %d bytes is not 4-byte aligned", buf.Len())
	}
	dir := extract(t, buf.Bytes())
	for name, want := range map[string]string{"etc/odd": "abc", "etc/four": "wxyz", "etc/empty": "", "run.sh": "#!/bin/sh\necho hi\n"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "run.sh")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("run.sh mode %v, %v; want 0755", st.Mode(), err)
	}
	if st, err := os.Stat(filepath.Join(dir, "etc/odd")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("etc/odd mode %v, %v; want 0600", st.Mode(), err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "etc/link")); err != nil || l != "odd" {
		t.Errorf("etc/link -> %q, %v; want odd", l, err)
	}
}

// TestAppend: an unaligned base archive followed by ours reads as both
// (cpio reads one archive at a time, so each is extracted on its own).
func TestAppend(t *testing.T) {
	var base bytes.Buffer
	b := NewWriter(&base)
	if err := b.File("base.txt", 0o644, []byte("from base")); err != nil {
		t.Fatal(err)
	}
	b.Close()
	baseBytes := append(base.Bytes(), 0, 0) // a base that does not end aligned
	var out bytes.Buffer
	err := Append(&out, baseBytes, func(w *Writer) error {
		return w.File("added.txt", 0o644, []byte("added"))
	})
	if err != nil {
		t.Fatal(err)
	}
	second := out.Bytes()[len(baseBytes)+2:] // past the base and its padding
	if !bytes.HasPrefix(second, []byte(magic)) {
		t.Fatalf("appended archive does not start 4-byte aligned after the base: % x", second[:8])
	}
	dir := extract(t, second)
	if got, err := os.ReadFile(filepath.Join(dir, "added.txt")); err != nil || string(got) != "added" {
		t.Errorf("added.txt = %q, %v", got, err)
	}
}

func TestBadNames(t *testing.T) {
	w := NewWriter(&bytes.Buffer{})
	for _, name := range []string{"", "/", "a\x00b"} {
		if err := w.File(name, 0o644, nil); !errors.Is(err, ErrName) {
			t.Errorf("File(%q) = %v, want ErrName", name, err)
		}
	}
}

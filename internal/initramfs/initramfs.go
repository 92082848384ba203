// Package initramfs writes the cpio archives Linux unpacks into its root
// file system at boot: the "newc" format (Documentation/driver-api/
// early-userspace/buffer-format.rst), uncompressed. Linux accepts several
// archives back to back in one initrd, so a test extends a base initramfs
// by appending an archive of its own files (Append).
package initramfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// newc header: the magic, then 13 fields of 8 hex digits (buffer-format.rst).
const (
	magic     = "070701"
	trailer   = "TRAILER!!!"
	modeDir   = 0o040000
	modeFile  = 0o100000
	modeLink  = 0o120000
	headerLen = 6 + 13*8
)

// ErrName is returned for an empty name or one with a NUL byte.
var ErrName = errors.New("initramfs: bad file name")

// Writer writes one newc archive; Close writes its trailer.
type Writer struct {
	w   io.Writer
	ino uint32
	off int64
	err error
}

// NewWriter starts an archive on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, ino: 1} }

// Dir adds a directory (mode is its permission bits).
func (cw *Writer) Dir(name string, perm os.FileMode) error {
	return cw.entry(name, modeDir|uint32(perm.Perm()), nil)
}

// File adds a regular file holding data (mode is its permission bits).
func (cw *Writer) File(name string, perm os.FileMode, data []byte) error {
	return cw.entry(name, modeFile|uint32(perm.Perm()), data)
}

// Symlink adds a symbolic link name -> target.
func (cw *Writer) Symlink(name, target string) error {
	return cw.entry(name, modeLink|0o777, []byte(target))
}

// Close ends the archive with its trailer entry. It does not close the
// underlying writer.
func (cw *Writer) Close() error {
	return cw.entry(trailer, 0, nil)
}

func (cw *Writer) entry(name string, mode uint32, data []byte) error {
	if cw.err != nil {
		return cw.err
	}
	name = strings.TrimPrefix(name, "/")
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("%w: %q", ErrName, name)
	}
	nlink := 1
	if mode&modeDir != 0 {
		nlink = 2
	}
	ino := cw.ino
	cw.ino++
	if name == trailer {
		ino = 0
	}
	hdr := fmt.Sprintf("%s%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		magic, ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	cw.write([]byte(hdr))
	cw.write(append([]byte(name), 0))
	cw.pad()
	cw.write(data)
	cw.pad()
	return cw.err
}

// pad aligns the stream to 4 bytes, as newc requires after the name and
// after the data.
func (cw *Writer) pad() {
	if n := cw.off % 4; n != 0 {
		cw.write(make([]byte, 4-n))
	}
}

func (cw *Writer) write(b []byte) {
	if cw.err != nil {
		return
	}
	n, err := cw.w.Write(b)
	cw.off += int64(n)
	cw.err = err
}

// Append writes base (an initramfs: one or more uncompressed archives, or
// a compressed one) to w followed by the archive that add builds. A
// compressed base is followed by an uncompressed archive, which Linux
// also accepts. base is padded to 4 bytes first, as Linux expects each
// archive to start aligned.
func Append(w io.Writer, base []byte, add func(*Writer) error) error {
	if _, err := w.Write(base); err != nil {
		return err
	}
	if n := len(base) % 4; n != 0 {
		if _, err := w.Write(make([]byte, 4-n)); err != nil {
			return err
		}
	}
	cw := NewWriter(w)
	if err := add(cw); err != nil {
		return err
	}
	return cw.Close()
}

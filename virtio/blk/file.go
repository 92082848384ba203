package virtioblk

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Errors of OpenFile, each a one-line reason the user can act on.
var (
	ErrLocked   = errors.New("locked by another process (another govm?)")
	ErrEmpty    = errors.New("is empty (0 bytes)")
	ErrIsDir    = errors.New("is a directory")
	ErrReadOnly = errors.New("virtioblk: write to a read-only disk")
)

// File is a Backend over a disk image or block device, locked for the life
// of the VM so that two VMMs never write the same disk.
type File struct {
	f        *os.File
	size     int64
	readOnly bool
}

var _ Backend = (*File)(nil)

// OpenFile opens a disk image. It takes a non-blocking flock: exclusive
// for read-write, shared for read-only (several VMs may share a read-only
// base image, none may write it meanwhile).
func OpenFile(path string, readOnly bool) (*File, error) {
	flag, how := os.O_RDWR, unix.LOCK_EX
	if readOnly {
		flag, how = os.O_RDONLY, unix.LOCK_SH
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("virtioblk: disk %s: %w", path, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("virtioblk: disk %s %w", path, ErrIsDir)
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("virtioblk: disk %s: %w", path, err)
	}
	if err := flock(f, how|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("virtioblk: disk %s is %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("virtioblk: disk %s: flock: %w", path, err)
	}
	// Seek rather than Stat: a block device stats as size 0.
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("virtioblk: disk %s: size: %w", path, err)
	}
	if size == 0 {
		f.Close()
		return nil, fmt.Errorf("virtioblk: disk %s %w", path, ErrEmpty)
	}
	return &File{f: f, size: size, readOnly: readOnly}, nil
}

func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Flock(int(fd), how)
			if ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// ReadAt reads from the disk.
func (f *File) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

// WriteAt writes to the disk; on a read-only disk it fails (the device
// checks first, this is the second line).
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	if f.readOnly {
		return 0, ErrReadOnly
	}
	return f.f.WriteAt(p, off)
}

// Sync flushes the disk (fdatasync semantics of os.File.Sync: fsync).
func (f *File) Sync() error { return f.f.Sync() }

// Size returns the disk size in bytes, as found at open.
func (f *File) Size() (int64, error) { return f.size, nil }

// Close releases the lock and the file.
func (f *File) Close() error { return f.f.Close() }

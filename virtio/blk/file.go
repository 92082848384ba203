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
	ErrLocked   = errors.New("locked by another process (another govm, or a QEMU?)")
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

// OpenFile opens a disk image and locks it as QEMU does (lock.go), so a
// govm and a QEMU refuse each other's image when either writes it; and
// with a non-blocking flock, which govm has always taken: exclusive for
// read-write, shared for read-only (several VMs may share a read-only base
// image, none may write it meanwhile).
func OpenFile(path string, readOnly bool) (*File, error) {
	flag, how := os.O_RDWR, unix.LOCK_EX
	if readOnly {
		flag, how = os.O_RDONLY, unix.LOCK_SH
	}
	// os errors (*fs.PathError) name the path already.
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("virtioblk: %w", err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("virtioblk: disk %s %w", path, ErrIsDir)
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("virtioblk: %w", err)
	}
	if err := flock(f, how|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("virtioblk: disk %s is %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("virtioblk: disk %s: flock: %w", path, err)
	}
	perm, shared := diskPerms(readOnly)
	if err := lockLikeQEMU(int(f.Fd()), perm, shared); err != nil {
		f.Close()
		if errors.Is(err, ErrLocked) {
			return nil, fmt.Errorf("virtioblk: disk %s is %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("virtioblk: disk %s: %w", path, err)
	}
	// Seek rather than Stat: a block device stats as size 0.
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("virtioblk: size: %w", err)
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

// iovMax is Linux's UIO_MAXIOV (IOV_MAX): preadv and pwritev fail with
// EINVAL for more buffers. A chain through an indirect table can have far
// more segments than that, so longer lists go in several calls.
const iovMax = 1024

var _ VectoredBackend = (*File)(nil)

// ReadAtv reads into bufs, in order, from the disk at off with preadv(2),
// straight into the caller's buffers (guest memory). Like io.ReaderAt it
// returns len of all bufs or an error: io.EOF when the file ended first,
// with the bytes before that already in place.
func (f *File) ReadAtv(bufs [][]byte, off int64) (int, error) {
	return vectored(f.f, bufs, off, unix.Preadv, io.EOF)
}

// WriteAtv writes bufs, in order, to the disk at off with pwritev(2). On a
// read-only disk it fails without writing.
func (f *File) WriteAtv(bufs [][]byte, off int64) (int, error) {
	if f.readOnly {
		return 0, ErrReadOnly
	}
	return vectored(f.f, bufs, off, unix.Pwritev, io.ErrShortWrite)
}

// vectored runs op (preadv or pwritev) until all of bufs is done, at most
// iovMax buffers per call. The kernel may stop short of the total (a
// signal, the 2 GiB per-call limit, the end of the file for a read), so
// each call resumes where the last one stopped. A call that moves nothing
// ends it with short (io.EOF for reads, io.ErrShortWrite for writes).
// bufs itself is not modified.
func vectored(f *os.File, bufs [][]byte, off int64, op func(int, [][]byte, int64) (int, error), short error) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	total := 0
	var opErr error
	// Control keeps the descriptor open for the duration: a concurrent
	// Close cannot hand the number to another file mid-call.
	cerr := rc.Control(func(fd uintptr) {
		rest, skip := bufs, 0 // skip: bytes of rest[0] already done
		var tmp [][]byte
		for {
			// Drop finished (and empty) buffers: rest[0] then has
			// bytes left, so a call below always asks for some.
			for len(rest) > 0 && skip >= len(rest[0]) {
				skip -= len(rest[0])
				rest = rest[1:]
			}
			if len(rest) == 0 {
				return
			}
			batch := rest[:min(len(rest), iovMax)]
			if skip > 0 {
				tmp = append(tmp[:0], batch...)
				tmp[0] = tmp[0][skip:]
				batch = tmp
			}
			n, err := op(int(fd), batch, off)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				opErr = err
				return
			}
			if n == 0 {
				opErr = short
				return
			}
			total += n
			off += int64(n)
			skip += n
		}
	})
	if cerr != nil {
		return total, cerr
	}
	return total, opErr
}

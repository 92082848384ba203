package virtioblk

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

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

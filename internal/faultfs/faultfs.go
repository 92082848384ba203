// Package faultfs is a test helper: a FUSE file system holding one
// in-memory file whose reads, writes and fsyncs fail on command with the
// errno the test chooses. It gives tests a real failing disk (the kernel's
// own error paths, pread/pwrite/fsync returning EIO) rather than a mock
// backend. Mounting needs /dev/fuse and root (mount(2) directly; no
// fusermount binary is used).
package faultfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Op is an operation that can be made to fail.
type Op int

// The operations a test can break.
const (
	Read Op = iota
	Write
	Fsync
	numOps
)

// FileName is the name of the one file under the mount point.
const FileName = "disk.img"

// ErrUnavailable is returned by Mount when this host cannot mount FUSE.
var ErrUnavailable = errors.New("faultfs: FUSE unavailable")

// FS is a mounted fault file system.
type FS struct {
	// Path is the file's path (Dir/FileName).
	Path string
	// Dir is the mount point.
	Dir    string
	server *fuse.Server
	file   *file
}

// Mount mounts a new file system at dir with one file of size bytes,
// filled with zeroes. Unmount it with Close.
func Mount(dir string, size int) (*FS, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	f := &file{data: make([]byte, size)}
	root := &root{file: f}
	srv, err := fs.Mount(dir, root, &fs.Options{MountOptions: fuse.MountOptions{
		FsName: "faultfs", Name: "faultfs",
		// mount(2) as root, and never a fallback to a fusermount
		// binary that a minimal CI image does not have.
		DirectMountStrict: true,
	}})
	if err != nil {
		return nil, fmt.Errorf("%w: mount %s: %w", ErrUnavailable, dir, err)
	}
	return &FS{Path: filepath.Join(dir, FileName), Dir: dir, server: srv, file: f}, nil
}

// Fail makes every later op fail with errno (0 makes it succeed again).
func (s *FS) Fail(op Op, errno syscall.Errno) {
	s.file.mu.Lock()
	defer s.file.mu.Unlock()
	s.file.fail[op] = errno
}

// Calls returns how many times op reached the file system.
func (s *FS) Calls(op Op) int {
	s.file.mu.Lock()
	defer s.file.mu.Unlock()
	return s.file.calls[op]
}

// Bytes returns a copy of the file's contents.
func (s *FS) Bytes() []byte {
	s.file.mu.Lock()
	defer s.file.mu.Unlock()
	return append([]byte(nil), s.file.data...)
}

// Stall makes every later op wait without an answer until Release or
// Close: a disk whose I/O never returns (a stalled network file system).
// A caller that is killed meanwhile gets its op interrupted.
func (s *FS) Stall(op Op) {
	s.file.mu.Lock()
	defer s.file.mu.Unlock()
	if s.file.release == nil {
		s.file.release = make(chan struct{})
	}
	s.file.stall[op] = true
}

// Release lets stalled ops (and later ones) go on.
func (s *FS) Release() {
	s.file.mu.Lock()
	defer s.file.mu.Unlock()
	s.file.stall = [numOps]bool{}
	if s.file.release != nil {
		close(s.file.release)
		s.file.release = nil
	}
}

// Stalled returns how many ops are waiting in Stall now.
func (s *FS) Stalled() int {
	s.file.mu.Lock()
	defer s.file.mu.Unlock()
	return s.file.waiting
}

// Close releases stalled ops and unmounts the file system (files still
// open keep it busy: close them first).
func (s *FS) Close() error {
	s.Release()
	return s.server.Unmount()
}

type root struct {
	fs.Inode
	file *file
}

var _ fs.NodeOnAdder = (*root)(nil)

func (r *root) OnAdd(ctx context.Context) {
	ch := r.NewPersistentInode(ctx, r.file, fs.StableAttr{Mode: syscall.S_IFREG})
	r.AddChild(FileName, ch, false)
}

type file struct {
	fs.Inode
	mu      sync.Mutex
	data    []byte
	fail    [numOps]syscall.Errno
	calls   [numOps]int
	stall   [numOps]bool
	release chan struct{} // closed by Release; nil when nothing stalls
	waiting int           // ops inside stallIfAsked
}

var (
	_ fs.NodeOpener    = (*file)(nil)
	_ fs.NodeReader    = (*file)(nil)
	_ fs.NodeWriter    = (*file)(nil)
	_ fs.NodeFsyncer   = (*file)(nil)
	_ fs.NodeGetattrer = (*file)(nil)
	_ fs.NodeSetattrer = (*file)(nil)
)

// Open asks for direct I/O: no page cache between the caller and this
// file system, so a read or write error reaches the very call that caused
// it (the way a failing disk under O_DIRECT behaves).
func (f *file) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

// enter counts op and returns its errno; with f.mu held. When op is
// stalled it first waits, without f.mu, for Release or the caller's end.
func (f *file) enter(ctx context.Context, op Op) syscall.Errno {
	f.calls[op]++
	if f.stall[op] {
		ch := f.release
		f.waiting++
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		f.mu.Lock()
		f.waiting--
		if ctx.Err() != nil {
			return syscall.EINTR
		}
	}
	return f.fail[op]
}

func (f *file) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.enter(ctx, Read); e != 0 {
		return nil, e
	}
	if off >= int64(len(f.data)) {
		return fuse.ReadResultData(nil), 0
	}
	n := copy(dest, f.data[off:])
	return fuse.ReadResultData(dest[:n]), 0
}

func (f *file) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.enter(ctx, Write); e != 0 {
		return 0, e
	}
	if off < 0 || off+int64(len(data)) > int64(len(f.data)) {
		return 0, syscall.EFBIG // the file has a fixed size, like a disk
	}
	return uint32(copy(f.data[off:], data)), 0
}

func (f *file) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.enter(ctx, Fsync)
}

func (f *file) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	out.Mode = syscall.S_IFREG | 0o600
	out.Size = uint64(len(f.data))
	return 0
}

// Setattr accepts (and ignores) what open(O_RDWR) and friends send.
func (f *file) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.Getattr(ctx, fh, out)
}

// Package sharefs serves a host directory to a guest over 9P2000.L: a
// p9.Attacher for github.com/hugelgupf/p9's server, confined beneath the
// directory whatever the guest sends and whatever changes in the host's
// tree meanwhile.
//
// How it stays inside: a file is a path relative to the share's root, and
// every use of it resolves that path again from the root's descriptor with
// openat2(2) and RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: no component may be
// "..", an absolute path, a symlink or a magic link that leads out, and a
// directory the host swaps for a symlink after the guest walked it is
// refused at the next use (ELOOP), never followed. Names the guest gives
// (walk, create, mkdir, rename, unlink) must be one component, not "." or
// "..". The guest sees symlinks as symlinks (it resolves them itself, in its
// own namespace) but the server never follows one. Operations on a name in
// a directory (mkdirat, symlinkat, renameat, unlinkat) work on the
// directory's descriptor so the name is the only thing resolved, and a
// final component is never followed. Device nodes cannot be made.
//
// A read-only share refuses every change with EROFS.
package sharefs

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/hugelgupf/p9/fsimpl/templatefs"
	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// Config is one share.
type Config struct {
	Root     string // the host directory
	ReadOnly bool
}

// Share is a host directory served confined beneath it.
type Share struct {
	root int // O_PATH descriptor of the root
	ro   bool
}

var _ p9.Attacher = (*Share)(nil)

// New opens cfg.Root (it must be a directory). Close releases it.
func New(cfg Config) (*Share, error) {
	fd, err := unix.Open(cfg.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sharefs: %s: %w", cfg.Root, err)
	}
	// openat2 is what confines every lookup: without it (Linux < 5.6)
	// there is no share.
	if probe, err := openBeneath(fd, ".", unix.O_PATH|unix.O_DIRECTORY, 0); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sharefs: openat2 (Linux 5.6 or later) is needed to confine a share: %w", err)
	} else {
		unix.Close(probe)
	}
	return &Share{root: fd, ro: cfg.ReadOnly}, nil
}

// Root is the root's descriptor: every lookup starts there (the sandbox
// allows openat2 on it alone).
func (s *Share) Root() int { return s.root }

// Close releases the root.
func (s *Share) Close() error { return unix.Close(s.root) }

// Attach is the share's root.
func (s *Share) Attach() (p9.File, error) { return &file{s: s, rel: "."}, nil }

// resolveFlags confine every lookup (see the package comment).
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openBeneath opens rel beneath dirfd, never following a symlink.
func openBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{
			Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
			Mode:    uint64(mode),
			Resolve: resolveFlags,
		})
		if err == unix.EINTR || err == unix.EAGAIN {
			continue // EAGAIN: a rename raced the lookup; try again
		}
		return fd, err
	}
}

// checkName refuses a name that is not one component.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || strings.ContainsRune(name, 0) {
		return linux.EINVAL
	}
	return nil
}

// errno turns a host error into what the guest sees.
func errno(err error) error {
	var e unix.Errno
	if errors.As(err, &e) {
		return linux.Errno(e)
	}
	return err
}

// file is one node of the share: its path from the root, and, once opened,
// a descriptor for I/O.
type file struct {
	templatefs.NotLockable
	p9.DefaultWalkGetAttr

	s   *Share
	rel string // cleaned, relative to the root, "." for the root
	fd  int    // opened for I/O (Open, Create), or 0
}

var _ p9.File = (*file)(nil)

// node opens f's path as an O_PATH descriptor (the node itself, a symlink
// included). The caller closes it.
func (f *file) node() (int, error) { return openBeneath(f.s.root, f.rel, unix.O_PATH, 0) }

// dir opens f's path as a directory (O_PATH): names are resolved beneath it.
func (f *file) dir() (int, error) {
	return openBeneath(f.s.root, f.rel, unix.O_PATH|unix.O_DIRECTORY, 0)
}

func (f *file) stat() (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := f.node()
	if err != nil {
		return st, errno(err)
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return st, errno(err)
	}
	return st, nil
}

func qidOf(st *unix.Stat_t) p9.QID {
	return p9.QID{Type: p9.FileMode(st.Mode).QIDType(), Path: st.Ino, Version: uint32(st.Mtim.Nsec) ^ uint32(st.Mtim.Sec)}
}

func (f *file) child(name string) *file {
	return &file{s: f.s, rel: path.Clean(path.Join(f.rel, name))}
}

// Walk implements p9.File.Walk. ".." goes to the parent, and stops at the
// root.
func (f *file) Walk(names []string) ([]p9.QID, p9.File, error) {
	cur := &file{s: f.s, rel: f.rel}
	if len(names) == 0 {
		if _, err := cur.stat(); err != nil {
			return nil, nil, err
		}
		return nil, cur, nil
	}
	var qids []p9.QID
	for _, name := range names {
		if name == ".." {
			cur = &file{s: f.s, rel: path.Dir(cur.rel)}
		} else {
			if err := checkName(name); err != nil {
				return nil, nil, err
			}
			cur = cur.child(name)
		}
		st, err := cur.stat()
		if err != nil {
			return nil, nil, err
		}
		qids = append(qids, qidOf(&st))
	}
	return qids, cur, nil
}

// GetAttr implements p9.File.GetAttr.
func (f *file) GetAttr(req p9.AttrMask) (p9.QID, p9.AttrMask, p9.Attr, error) {
	st, err := f.stat()
	if err != nil {
		return p9.QID{}, p9.AttrMask{}, p9.Attr{}, err
	}
	_ = req // every field is filled in, whatever was asked
	a := p9.Attr{
		Mode: p9.FileMode(st.Mode), UID: p9.UID(st.Uid), GID: p9.GID(st.Gid), NLink: p9.NLink(st.Nlink),
		RDev: p9.Dev(st.Rdev), Size: uint64(st.Size), BlockSize: uint64(st.Blksize), Blocks: uint64(st.Blocks),
		ATimeSeconds: uint64(st.Atim.Sec), ATimeNanoSeconds: uint64(st.Atim.Nsec),
		MTimeSeconds: uint64(st.Mtim.Sec), MTimeNanoSeconds: uint64(st.Mtim.Nsec),
		CTimeSeconds: uint64(st.Ctim.Sec), CTimeNanoSeconds: uint64(st.Ctim.Nsec),
	}
	valid := p9.AttrMask{Mode: true, UID: true, GID: true, NLink: true, RDev: true, Size: true,
		Blocks: true, ATime: true, MTime: true, CTime: true, INo: true}
	return qidOf(&st), valid, a, nil
}

// StatFS implements p9.File.StatFS.
func (f *file) StatFS() (p9.FSStat, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(f.s.root, &st); err != nil {
		return p9.FSStat{}, errno(err)
	}
	return p9.FSStat{Type: uint32(st.Type), BlockSize: uint32(st.Bsize), Blocks: st.Blocks,
		BlocksFree: st.Bfree, BlocksAvailable: st.Bavail, Files: st.Files, FilesFree: st.Ffree,
		NameLength: uint32(st.Namelen)}, nil
}

// openMask is what of the guest's open flags reaches the host: the access
// mode and the flags that change what reads and writes do.
const openMask = unix.O_ACCMODE | unix.O_TRUNC | unix.O_APPEND | unix.O_SYNC | unix.O_DSYNC

func (s *Share) writes(flags int) bool {
	return flags&unix.O_ACCMODE != unix.O_RDONLY || flags&unix.O_TRUNC != 0
}

// Open implements p9.File.Open. A symlink cannot be opened (ELOOP).
func (f *file) Open(mode p9.OpenFlags) (p9.QID, uint32, error) {
	flags := int(mode) & openMask
	if f.s.ro && f.s.writes(flags) {
		return p9.QID{}, 0, linux.EROFS
	}
	fd, err := openBeneath(f.s.root, f.rel, flags, 0)
	if err != nil {
		return p9.QID{}, 0, errno(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return p9.QID{}, 0, errno(err)
	}
	f.fd = fd
	return qidOf(&st), 0, nil
}

// ReadAt implements p9.File.ReadAt.
func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if f.fd == 0 {
		return 0, linux.EBADF
	}
	n, err := unix.Pread(f.fd, p, off)
	if err != nil {
		return 0, errno(err)
	}
	return n, nil
}

// WriteAt implements p9.File.WriteAt.
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if f.fd == 0 {
		return 0, linux.EBADF
	}
	if f.s.ro {
		return 0, linux.EROFS
	}
	n, err := unix.Pwrite(f.fd, p, off)
	if err != nil {
		return n, errno(err)
	}
	return n, nil
}

// FSync implements p9.File.FSync.
func (f *file) FSync() error {
	if f.fd == 0 {
		return linux.EBADF
	}
	return errno(unix.Fsync(f.fd))
}

// Close implements p9.File.Close.
func (f *file) Close() error {
	if f.fd != 0 {
		fd := f.fd
		f.fd = 0
		return unix.Close(fd)
	}
	return nil
}

// Create implements p9.File.Create: a new regular file, never through an
// existing name (O_EXCL, and a symlink there is not followed).
func (f *file) Create(name string, mode p9.OpenFlags, perm p9.FileMode, _ p9.UID, _ p9.GID) (p9.File, p9.QID, uint32, error) {
	if err := checkName(name); err != nil {
		return nil, p9.QID{}, 0, err
	}
	if f.s.ro {
		return nil, p9.QID{}, 0, linux.EROFS
	}
	c := f.child(name)
	fd, err := openBeneath(f.s.root, c.rel, int(mode)&openMask|unix.O_CREAT|unix.O_EXCL, uint32(perm&p9.AllPermissions))
	if err != nil {
		return nil, p9.QID{}, 0, errno(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, p9.QID{}, 0, errno(err)
	}
	c.fd = fd
	return c, qidOf(&st), 0, nil
}

// inDir runs op on f's directory descriptor, for one checked name.
func (f *file) inDir(name string, op func(dirfd int) error) error {
	if err := checkName(name); err != nil {
		return err
	}
	if f.s.ro {
		return linux.EROFS
	}
	d, err := f.dir()
	if err != nil {
		return errno(err)
	}
	defer unix.Close(d)
	return errno(op(d))
}

// childQID is the QID of name in f, after an operation made it.
func (f *file) childQID(name string) (p9.QID, error) {
	st, err := f.child(name).stat()
	if err != nil {
		return p9.QID{}, err
	}
	return qidOf(&st), nil
}

// Mkdir implements p9.File.Mkdir.
func (f *file) Mkdir(name string, perm p9.FileMode, _ p9.UID, _ p9.GID) (p9.QID, error) {
	if err := f.inDir(name, func(d int) error { return unix.Mkdirat(d, name, uint32(perm&p9.AllPermissions)) }); err != nil {
		return p9.QID{}, err
	}
	return f.childQID(name)
}

// Symlink implements p9.File.Symlink. The target is the guest's data: it is
// stored, never followed here.
func (f *file) Symlink(target, name string, _ p9.UID, _ p9.GID) (p9.QID, error) {
	if err := f.inDir(name, func(d int) error { return unix.Symlinkat(target, d, name) }); err != nil {
		return p9.QID{}, err
	}
	return f.childQID(name)
}

// Link implements p9.File.Link: target is a file of this share, linked
// through its own descriptor (AT_EMPTY_PATH), so no path is resolved again.
func (f *file) Link(target p9.File, name string) error {
	t, ok := target.(*file)
	if !ok || t.s != f.s {
		return linux.EXDEV
	}
	return f.inDir(name, func(d int) error {
		tfd, err := t.node()
		if err != nil {
			return err
		}
		defer unix.Close(tfd)
		return unix.Linkat(tfd, "", d, name, unix.AT_EMPTY_PATH)
	})
}

// Mknod implements p9.File.Mknod: a share holds no device nodes or FIFOs
// made by the guest.
func (f *file) Mknod(string, p9.FileMode, uint32, uint32, p9.UID, p9.GID) (p9.QID, error) {
	return p9.QID{}, linux.EPERM
}

// Rename implements p9.File.Rename (9P2000.L clients use RenameAt).
func (f *file) Rename(newDir p9.File, newName string) error {
	if f.rel == "." {
		return linux.EBUSY
	}
	parent := &file{s: f.s, rel: path.Dir(f.rel)}
	return parent.RenameAt(path.Base(f.rel), newDir, newName)
}

// RenameAt implements p9.File.RenameAt.
func (f *file) RenameAt(oldName string, newDir p9.File, newName string) error {
	nd, ok := newDir.(*file)
	if !ok || nd.s != f.s {
		return linux.EXDEV
	}
	if err := checkName(newName); err != nil {
		return err
	}
	return f.inDir(oldName, func(d int) error {
		n, err := nd.dir()
		if err != nil {
			return err
		}
		defer unix.Close(n)
		return unix.Renameat(d, oldName, n, newName)
	})
}

// Renamed implements p9.File.Renamed: the server tells a file its new place.
func (f *file) Renamed(parent p9.File, newName string) {
	if p, ok := parent.(*file); ok && checkName(newName) == nil {
		f.rel = path.Clean(path.Join(p.rel, newName))
	}
}

// UnlinkAt implements p9.File.UnlinkAt.
func (f *file) UnlinkAt(name string, flags uint32) error {
	return f.inDir(name, func(d int) error { return unix.Unlinkat(d, name, int(flags)&unix.AT_REMOVEDIR) })
}

// Readlink implements p9.File.Readlink.
func (f *file) Readlink() (string, error) {
	fd, err := f.node()
	if err != nil {
		return "", errno(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", errno(err)
	}
	return string(buf[:n]), nil
}

// SetAttr implements p9.File.SetAttr: permissions, size, owner and times,
// each through a descriptor of the node (a symlink's own attributes cannot
// be set: ELOOP).
func (f *file) SetAttr(valid p9.SetAttrMask, attr p9.SetAttr) error {
	if valid.Empty() {
		return nil
	}
	if f.s.ro {
		return linux.EROFS
	}
	flags := unix.O_RDONLY
	if valid.Size {
		flags = unix.O_WRONLY
	}
	fd, err := openBeneath(f.s.root, f.rel, flags, 0)
	if errors.Is(err, unix.EISDIR) {
		fd, err = openBeneath(f.s.root, f.rel, unix.O_RDONLY, 0)
	}
	if err != nil {
		return errno(err)
	}
	defer unix.Close(fd)
	if valid.Permissions {
		if err := unix.Fchmod(fd, uint32(attr.Permissions&07777)); err != nil {
			return errno(err)
		}
	}
	if valid.Size {
		if err := unix.Ftruncate(fd, int64(attr.Size)); err != nil {
			return errno(err)
		}
	}
	if valid.UID || valid.GID {
		uid, gid := -1, -1
		if valid.UID {
			uid = int(attr.UID)
		}
		if valid.GID {
			gid = int(attr.GID)
		}
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return errno(err)
		}
	}
	if valid.ATime || valid.MTime {
		ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if valid.ATime {
			ts[0] = unix.Timespec{Sec: int64(attr.ATimeSeconds), Nsec: int64(attr.ATimeNanoSeconds)}
			if !valid.ATimeNotSystemTime {
				ts[0] = unix.Timespec{Nsec: unix.UTIME_NOW}
			}
		}
		if valid.MTime {
			ts[1] = unix.Timespec{Sec: int64(attr.MTimeSeconds), Nsec: int64(attr.MTimeNanoSeconds)}
			if !valid.MTimeNotSystemTime {
				ts[1] = unix.Timespec{Nsec: unix.UTIME_NOW}
			}
		}
		if err := unix.UtimesNanoAt(fd, "", ts[:], unix.AT_EMPTY_PATH); err != nil {
			return errno(err)
		}
	}
	return nil
}

// GetXattr implements p9.File.GetAttr for extended attributes: a share
// has none (ENODATA, what getxattr(2) says of an attribute that is not
// there; overlayfs over a share asks for its own and must be told so, not
// that the call failed).
func (f *file) GetXattr(string) ([]byte, error) { return nil, linux.ENODATA }

// ListXattrs implements p9.File.ListXattrs: none.
func (f *file) ListXattrs() ([]string, error) { return nil, nil }

// SetXattr implements p9.File.SetXattr: not supported.
func (f *file) SetXattr(string, []byte, p9.XattrFlags) error { return linux.EOPNOTSUPP }

// RemoveXattr implements p9.File.RemoveXattr: not supported.
func (f *file) RemoveXattr(string) error { return linux.EOPNOTSUPP }

// Readdir implements p9.File.Readdir on a directory opened with Open: the
// entries after offset (an index), as many as fit count bytes.
func (f *file) Readdir(offset uint64, count uint32) (p9.Dirents, error) {
	if f.fd == 0 {
		return nil, linux.EBADF
	}
	names, err := readNames(f.fd)
	if err != nil {
		return nil, errno(err)
	}
	var out p9.Dirents
	used := uint32(0)
	for i := offset; i < uint64(len(names)); i++ {
		var st unix.Stat_t
		if err := unix.Fstatat(f.fd, names[i], &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		q := qidOf(&st)
		// A dirent on the wire: qid[13] offset[8] type[1] name[s].
		size := uint32(13 + 8 + 1 + 2 + len(names[i]))
		if used+size > count {
			break
		}
		used += size
		out = append(out, p9.Dirent{QID: q, Offset: i + 1, Type: q.Type, Name: names[i]})
	}
	return out, nil
}

// readNames lists a directory from its start, "." and ".." left out.
func readNames(fd int) ([]string, error) {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil, err
	}
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

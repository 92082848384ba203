package api

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrInUse means a live govm (running, or still exiting) holds the socket.
var ErrInUse = errors.New("api: socket in use by a running VM")

// Dir is where VM sockets live: /run/govm as root, $XDG_RUNTIME_DIR/govm
// otherwise. Without XDG_RUNTIME_DIR (a minimal CI environment, cron) it
// falls back to $TMPDIR/govm-UID, a directory only this user may enter.
func Dir() string {
	if os.Geteuid() == 0 {
		return "/run/govm"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "govm")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("govm-%d", os.Geteuid()))
}

// SocketPath is the socket of the VM called name in Dir.
func SocketPath(name string) string {
	return filepath.Join(Dir(), name+".sock")
}

// CheckName rejects names that cannot be a socket file name.
func CheckName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("VM name %q: must be non-empty and contain no '/'", name)
	}
	return nil
}

// lockSuffix names the lock beside each socket: "NAME.sock.lock". Lock
// files stay (removing one would race with the next VM of the name).
const lockSuffix = ".lock"

// Socket is a VM's control socket. Its name is this VM's from Listen to
// Close: a lock beside it (flock, held for the VM's life) keeps a second
// VM of the same name from taking it, even while the first is exiting,
// and Close removes the socket file only if it is still the one this VM
// bound. Everything goes through a descriptor of the socket's directory,
// opened once: a path swapped under govm (a symlink in a shared
// directory) cannot redirect the bind or the removal, and the removal at
// exit needs no path lookup.
type Socket struct {
	Path     string
	dir      int // O_PATH descriptor of the socket's directory
	base     string
	lock     int // the flocked lock file
	dev, ino uint64
}

// Listen creates the VM's socket at path, mode 0600; its directory is
// created (mode 0700) if missing. strict is for govm's own directory
// (Dir): it must then be a real directory (no symlink), owned by this user
// and closed to everyone else (mode 0700), or Listen refuses it. A path
// the user chose (--api-socket) is theirs to judge. A socket whose lock
// is free (its govm died) is replaced; one whose lock is held is ErrInUse.
// Closing the listener leaves the file: Close the Socket when the VM is
// gone.
func Listen(path string, strict bool) (*net.UnixListener, *Socket, error) {
	dirPath, base := filepath.Dir(path), filepath.Base(path)
	if err := os.MkdirAll(dirPath, 0o700); err != nil {
		return nil, nil, fmt.Errorf("api socket directory: %w", err)
	}
	dir, err := unix.Open(dirPath, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|nofollow(strict), 0)
	if strict && errors.Is(err, unix.ENOTDIR) {
		return nil, nil, fmt.Errorf("api socket directory %s is not a directory (a symbolic link is refused too); remove it, or use --api-socket PATH", dirPath)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("api socket directory %s: %w", dirPath, err)
	}
	s := &Socket{Path: path, dir: dir, base: base, lock: -1}
	ok := false
	defer func() {
		if !ok {
			s.release()
		}
	}()
	if strict {
		if err := checkOwnDir(dir, dirPath); err != nil {
			return nil, nil, err
		}
	}
	s.lock, err = unix.Openat(dir, base+lockSuffix, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("api socket lock %s%s: %w", path, lockSuffix, err)
	}
	if err := unix.Flock(s.lock, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil, fmt.Errorf("%s: %w", path, ErrInUse)
		}
		return nil, nil, fmt.Errorf("api socket lock %s%s: %w", path, lockSuffix, err)
	}
	// With the lock held, a socket file already there is a dead govm's.
	if err := s.removeStale(); err != nil {
		return nil, nil, err
	}
	// umask-proof 0600: the socket is created 0600 by umask 0177 only
	// for the instant of bind, then made explicit.
	old := syscall.Umask(0o177)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.viaDir(), Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, nil, fmt.Errorf("api socket %s: %w", path, err)
	}
	// The caller removes the file once the VM is gone (govm stop waits
	// for that), not when the listener closes.
	l.SetUnlinkOnClose(false)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		err = unix.Fchmodat(dir, base, 0o600, 0)
		s.dev, s.ino = uint64(st.Dev), st.Ino
	}
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("api socket %s: %w", path, err)
	}
	ok = true
	return l, s, nil
}

func nofollow(strict bool) int {
	if strict {
		return unix.O_NOFOLLOW
	}
	return 0
}

// checkOwnDir requires govm's socket directory to be a directory (the
// open refused a symlink) owned by this user and of mode 0700: in a shared
// place such as /tmp someone else could have made it first, and would
// then see or replace the sockets.
func checkOwnDir(dir int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(dir, &st); err != nil {
		return fmt.Errorf("api socket directory %s: %w", path, err)
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("api socket directory %s belongs to uid %d, not to you; remove it, or use --api-socket PATH", path, st.Uid)
	}
	if perm := st.Mode & 0o777; perm&0o077 != 0 {
		return fmt.Errorf("api socket directory %s has mode %#o, open to others; chmod 700 it, or use --api-socket PATH", path, perm)
	}
	return nil
}

// DirFD is the O_PATH descriptor of the socket's directory, through which
// Close removes the socket (a sandbox may allow removals there alone).
func (s *Socket) DirFD() int { return s.dir }

// viaDir is the socket's path through the directory descriptor.
func (s *Socket) viaDir() string {
	return fmt.Sprintf("/proc/self/fd/%d/%s", s.dir, s.base)
}

// removeStale removes a socket file left at the path (the lock is held, so
// no live govm owns it). Anything else there is the user's: an error.
func (s *Socket) removeStale() error {
	var st unix.Stat_t
	err := unix.Fstatat(s.dir, s.base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("api socket %s: %w", s.Path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("api socket %s exists and is not a socket; remove it or pick another --api-socket", s.Path)
	}
	if err := unix.Unlinkat(s.dir, s.base, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("api socket: removing stale %s: %w", s.Path, err)
	}
	return nil
}

// Close removes the socket file if it is still the one Listen bound (same
// device and inode), then gives up the name. Safe to call more than once.
func (s *Socket) Close() error {
	if s == nil || s.dir < 0 {
		return nil
	}
	var err error
	var st unix.Stat_t
	if unix.Fstatat(s.dir, s.base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		uint64(st.Dev) == s.dev && st.Ino == s.ino {
		if e := unix.Unlinkat(s.dir, s.base, 0); e != nil && !errors.Is(e, unix.ENOENT) {
			err = fmt.Errorf("api socket %s: %w", s.Path, e)
		}
	}
	s.release()
	return err
}

// release closes the lock (giving up the name) and the directory.
func (s *Socket) release() {
	if s.lock >= 0 {
		unix.Close(s.lock)
		s.lock = -1
	}
	if s.dir >= 0 {
		unix.Close(s.dir)
		s.dir = -1
	}
}

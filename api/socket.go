package api

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrInUse means a live govm already listens on the socket.
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

// Listen creates the VM's socket at path, mode 0600 in a directory of mode
// 0700 (created if missing). Closing the listener leaves the file: remove
// it when the VM is gone. A socket left by a govm that died (nobody
// accepts on it) is replaced; one a live govm answers on is ErrInUse.
func Listen(path string) (*net.UnixListener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("api socket directory: %w", err)
	}
	// In a shared directory such as /tmp someone else could have made
	// the directory first and would then see (or replace) our socket.
	if st, err := os.Stat(dir); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() && os.Geteuid() != 0 {
			return nil, fmt.Errorf("api socket directory %s belongs to uid %d, not to you; use --api-socket PATH", dir, sys.Uid)
		}
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	// umask-proof 0600: the socket is created 0600 by umask 0177 only
	// for the instant of bind, then chmod makes it explicit.
	old := syscall.Umask(0o177)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("%s: %w", path, ErrInUse)
		}
		return nil, fmt.Errorf("api socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("api socket: %w", err)
	}
	// The caller removes the file once the VM is gone (govm stop waits
	// for that), not when the listener closes.
	l.SetUnlinkOnClose(false)
	return l, nil
}

// removeStale removes path if it is a socket nobody listens on.
func removeStale(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("api socket: %w", err)
	}
	if st.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("api socket %s exists and is not a socket; remove it or pick another --api-socket", path)
	}
	c, err := net.Dial("unix", path)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s: %w", path, ErrInUse)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		// EACCES: someone else's socket; not ours to remove.
		return fmt.Errorf("api socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("api socket: removing stale %s: %w", path, err)
	}
	return nil
}

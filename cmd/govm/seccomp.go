package main

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/govm/govm/api"
	"github.com/govm/govm/sandbox"
)

// seccompDefault is --seccomp's default: on, unless GOVM_SECCOMP says
// otherwise (contributors set GOVM_SECCOMP=audit to run a whole test suite
// with the filter in log-and-allow mode).
func seccompDefault() string {
	if v := os.Getenv("GOVM_SECCOMP"); v != "" {
		return v
	}
	return "on"
}

// startSandbox loads the seccomp filter, just before the vCPUs run: all
// set-up (files, taps, RAM, the kernel, the API socket) is done, so the
// filter only needs what the run loop and the exit need (sandbox/allow.go),
// and the API socket's descriptors for its argument conditions (ln and
// sock are nil without an API).
func startSandbox(mode sandbox.Mode, ln *net.UnixListener, sock *api.Socket) error {
	p := sandbox.Params{PID: os.Getpid(), Listener: -1, SocketDir: -1}
	if ln != nil {
		rc, err := ln.SyscallConn()
		if err != nil {
			return err
		}
		if err := rc.Control(func(fd uintptr) { p.Listener = int(fd) }); err != nil {
			return err
		}
		p.SocketDir = sock.DirFD()
	}
	if err := sandbox.Install(mode, p); err != nil {
		return err
	}
	// Hidden test hook: make one system call a compromised govm would
	// want (GOVM_TEST_SECCOMP_PROBE=NAME), so a test can see the filter
	// refuse it (on: SIGSYS) or log and allow it (audit).
	if name := os.Getenv("GOVM_TEST_SECCOMP_PROBE"); name != "" {
		fmt.Fprintf(newMsgWriter(), "govm: seccomp probe %s: %v\n", name, seccompProbe(name))
	}
	return nil
}

// seccompProbe makes the call the probe named, and returns its error.
// Each is harmless when it is allowed (audit mode): it signals nothing,
// creates and removes only its own file in the temporary directory.
func seccompProbe(name string) error {
	tmp := os.TempDir() + "/govm-seccomp-probe"
	switch name {
	case "getpriority":
		_, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
		return err
	case "open":
		fd, err := unix.Open("/etc/hostname", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		return err
	case "create":
		fd, err := unix.Open(tmp, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		unix.Close(fd)
		return err
	case "unlink":
		return unix.Unlinkat(unix.AT_FDCWD, tmp, 0)
	case "socket":
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		unix.Close(fd)
		return err
	case "tgkill-other":
		return unix.Tgkill(1, 1, 0) // signal 0: a check, nothing sent
	case "kill":
		return unix.Kill(1, 0)
	case "mmap-exec":
		b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err == nil {
			unix.Munmap(b)
		}
		return err
	case "mprotect-exec":
		b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			return err
		}
		defer unix.Munmap(b)
		return unix.Mprotect(b, unix.PROT_READ|unix.PROT_EXEC)
	case "prlimit-other":
		var old unix.Rlimit
		return unix.Prlimit(1, unix.RLIMIT_NOFILE, nil, &old)
	case "ioctl-other":
		_, err := unix.IoctlGetInt(0, unix.TIOCINQ) // FIONREAD
		return err
	case "dup":
		fd, err := unix.Dup(1)
		unix.Close(fd)
		return err
	case "execve":
		return unix.Exec("/bin/true", []string{"true"}, nil)
	}
	return fmt.Errorf("unknown probe %q", name)
}

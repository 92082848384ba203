// Package sandbox confines a running govm with a seccomp filter: after
// set-up, every thread may make only the system calls in allow.go, several
// of them only with the arguments a running VM uses (its own KVM and tap
// ioctls, signals to its own threads, memory never executable, accept on
// its API socket, a removal only in that socket's directory). A guest that
// finds a bug in a device emulator then holds a process that can still do
// KVM_RUN, disk and tap I/O, and little else: no open, create or delete
// of any path, no new socket, no signal to another process, no execve,
// fork or ptrace, no mounts or modules.
//
// One filter for every thread: filters are per thread, but a thread the Go
// runtime starts inherits the filter of the thread that started it, and
// any thread (a vCPU's among them) may start one, which then runs any
// goroutine. A stricter filter on vCPU threads would end up on I/O
// threads and kill govm there.
//
// The filter is built by github.com/elastic/go-seccomp-bpf (no hand-written
// BPF) and loaded with SECCOMP_FILTER_FLAG_TSYNC, so it covers every OS
// thread the Go runtime already started, and new threads inherit it. It
// sets no_new_privs, as the kernel requires of an unprivileged filter.
package sandbox

import (
	"errors"
	"fmt"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// Mode is the --seccomp setting.
type Mode int

// Modes.
const (
	// On refuses every call outside the list: the kernel sends SIGSYS,
	// and the Go runtime dies with "SIGSYS: bad system call" and the
	// stack of the goroutine that made the call (exit status 2).
	On Mode = iota
	// Off loads no filter.
	Off
	// Audit allows every call and has the kernel log the ones outside
	// the list (audit type 1326 in dmesg / the audit log): for
	// contributors looking for what a new code path needs.
	Audit
)

// ParseMode parses a --seccomp value: on, off or audit.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "on", "":
		return On, nil
	case "off":
		return Off, nil
	case "audit":
		return Audit, nil
	}
	return 0, fmt.Errorf("%w %q: want on, off or audit", ErrMode, s)
}

// ErrMode is returned by ParseMode for an unknown value.
var ErrMode = errors.New("sandbox: unknown seccomp mode")

// String returns the flag spelling of m.
func (m Mode) String() string {
	switch m {
	case Off:
		return "off"
	case Audit:
		return "audit"
	}
	return "on"
}

// Filter returns the filter for mode m (On or Audit) and process p.
//
// The default action is a trap (SIGSYS to the calling thread), not
// SECCOMP_RET_KILL_PROCESS and not an EPERM: a kill leaves only a kernel
// audit record that most users never see, and an EPERM lets govm go on
// with a failed close or write it cannot explain. The trap kills govm
// through the Go runtime, which prints which call it was and where.
func Filter(m Mode, p Params) seccomp.Filter {
	def := seccomp.ActionTrap
	if m == Audit {
		def = seccomp.ActionLog
	}
	return seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: def,
			Syscalls: []seccomp.SyscallGroup{{
				Action:             seccomp.ActionAllow,
				Names:              names(p),
				NamesWithCondtions: conditioned(p),
			}, {
				// Opening a path fails, but does not kill: govm opens
				// nothing after start, and glibc (a cgo build) tries
				// /sys/devices/system/cpu/online when a new thread
				// first allocates, and copes with the error.
				Action: seccomp.ActionErrno | seccomp.Action(unix.EPERM),
				Names:  []string{"open", "openat", "openat2", "creat"},
			}, {
				// As if the kernel were older than clone3: callers
				// fall back to clone (allow.go).
				Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS),
				Names:  []string{"clone3"},
			}},
		},
	}
}

// Install loads the filter for m and p into every thread of the process;
// Off does nothing. It cannot be undone.
func Install(m Mode, p Params) error {
	if m == Off {
		return nil
	}
	if !seccomp.Supported() {
		return ErrUnsupported
	}
	if err := seccomp.LoadFilter(Filter(m, p)); err != nil {
		return fmt.Errorf("sandbox: load seccomp filter: %w", err)
	}
	return nil
}

// ErrUnsupported is returned by Install on a kernel without seccomp
// filters (use --seccomp=off there).
var ErrUnsupported = errors.New("sandbox: this kernel has no seccomp filter support (use --seccomp=off)")

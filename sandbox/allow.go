package sandbox

import (
	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"

	"github.com/govm/govm/kvm"
)

// The allow-list: every system call a running govm makes, from the moment
// the filter is loaded (just before the vCPUs start) to its exit, found by
// tracing a VM with a disk, a tap, a console and every API call (and
// contributors' --seccomp=audit runs). Set-up (opening /dev/kvm, the
// kernel, disks, the tap, the API socket, guest RAM) happens before and
// needs nothing here. No call on it names a path: nothing is opened,
// created or removed by name after start.
var allowed = [][]string{
	// Device and console I/O on descriptors opened at set-up: disk images
	// (pread/pwrite, fsync), the tap (readv/writev), eventfds (kicks,
	// alarms, the watchdog's stop), stdin and stdout, the API's
	// connections; ppoll for a device waiting on its doorbells.
	{"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
		"fsync", "fdatasync", "ppoll", "poll", "close", "eventfd2", "fstat"},
	// The API's accepted connections (accept4 is conditioned below).
	{"getsockname", "shutdown"},
	// The Go runtime: memory (mmap and mprotect are conditioned below),
	// scheduling, signals (preemption by SIGURG, SIGUSR1 stats,
	// SIGINT/SIGTERM; tgkill below), timers and netpoll, exit.
	{"munmap", "madvise", "brk", "futex", "sched_yield", "sched_getaffinity", "nanosleep",
		"clock_nanosleep", "clock_gettime", "gettimeofday", "getrandom", "getpid", "gettid",
		"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "arch_prctl",
		"epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "restart_syscall",
		"exit", "exit_group", "membarrier", "rseq"},
	// glibc, when govm is built with cgo: pthread_create registers its
	// robust futex list.
	{"set_robust_list"},
	// GOVM_CPUPROFILE: the profiler's per-thread timers.
	{"setitimer", "timer_create", "timer_settime", "timer_delete"},
}

// Params are what the argument conditions need to know of this process:
// the only targets some calls may have.
type Params struct {
	// PID is this process: tgkill may signal its own threads only.
	PID int
	// Listener is the API socket's listening descriptor, the only one
	// accept4 may take connections from; -1 without an API.
	Listener int
	// SocketDir is the API socket's directory (an O_PATH descriptor), the
	// only place unlinkat may remove from (the socket, at exit) and
	// newfstatat may look (to check it is still ours); -1 without.
	SocketDir int
	// ShareRoots are the --share directories' root descriptors
	// (internal/sharefs): with any, the calls a 9P server makes on their
	// trees are allowed, and openat2 only beneath these roots (sharefs
	// resolves every path from a root, with RESOLVE_BENEATH and no
	// symlinks). Without shares none of those calls is allowed.
	ShareRoots []int
}

// shareCalls are the calls internal/sharefs makes on descriptors it opened
// beneath a share's root (a directory for the name operations, a file for
// I/O and attributes). They name at most one path component, resolved
// beneath that descriptor.
var shareCalls = []string{"mkdirat", "symlinkat", "linkat", "renameat", "renameat2", "unlinkat",
	"readlinkat", "newfstatat", "getdents64", "lseek", "fchmod", "fchown", "ftruncate",
	"utimensat", "fstatfs"}

// ioctls are the requests a running VM makes: KVM's (kvm.RunningIoctls),
// the tap's offload settings when a driver activates virtio-net, and the
// terminal's mode (govm's messages look at it; the console restores it at
// exit).
func ioctls() []uint64 {
	var out []uint64
	for _, r := range kvm.RunningIoctls() {
		out = append(out, uint64(r))
	}
	return append(out, unix.TUNSETOFFLOAD, unix.TUNSETVNETHDRSZ, unix.TCGETS, unix.TCSETS)
}

// conditioned returns the calls allowed only with certain arguments.
func conditioned(p Params) []seccomp.NameWithConditions {
	eq := func(arg int, v uint64) seccomp.ArgumentConditions {
		return seccomp.ArgumentConditions{{Argument: uint32(arg), Operation: seccomp.Equal, Value: v}}
	}
	// New threads of this process only (CLONE_THREAD, which the Go
	// runtime always passes): no fork. clone3 takes its flags in a
	// struct the filter cannot read; it fails with ENOSYS instead (see
	// Filter), and glibc falls back to clone.
	out := []seccomp.NameWithConditions{{Name: "clone", Conditions: seccomp.ArgumentConditions{{
		Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_THREAD}}}}
	// Memory never made executable.
	for _, name := range []string{"mmap", "mprotect"} {
		out = append(out, seccomp.NameWithConditions{Name: name, Conditions: seccomp.ArgumentConditions{{
			Argument: 2, Operation: seccomp.BitsNotSet, Value: unix.PROT_EXEC}}})
	}
	// Signals to this process's threads only.
	out = append(out, seccomp.NameWithConditions{Name: "tgkill", Conditions: eq(0, uint64(p.PID))})
	for _, r := range ioctls() {
		out = append(out, seccomp.NameWithConditions{Name: "ioctl", Conditions: eq(1, r)})
	}
	// Descriptor flags only: no F_DUPFD, no locks.
	for _, c := range []uint64{unix.F_GETFL, unix.F_SETFL, unix.F_GETFD, unix.F_SETFD} {
		out = append(out, seccomp.NameWithConditions{Name: "fcntl", Conditions: eq(1, c)})
	}
	// Naming threads (vCPU threads are named for host accounting).
	for _, o := range []uint64{unix.PR_SET_NAME, unix.PR_GET_NAME} {
		out = append(out, seccomp.NameWithConditions{Name: "prctl", Conditions: eq(0, o)})
	}
	if p.Listener >= 0 {
		out = append(out, seccomp.NameWithConditions{Name: "accept4", Conditions: eq(0, uint64(p.Listener))})
	}
	for _, fd := range p.ShareRoots {
		out = append(out, seccomp.NameWithConditions{Name: "openat2", Conditions: eq(0, uint64(fd))})
	}
	if len(p.ShareRoots) == 0 && p.SocketDir >= 0 {
		// (With shares, unlinkat and newfstatat are allowed outright:
		// shareCalls.)
		out = append(out,
			seccomp.NameWithConditions{Name: "newfstatat", Conditions: eq(0, uint64(p.SocketDir))},
			seccomp.NameWithConditions{Name: "unlinkat", Conditions: seccomp.ArgumentConditions{
				{Argument: 0, Operation: seccomp.Equal, Value: uint64(p.SocketDir)},
				{Argument: 2, Operation: seccomp.Equal, Value: 0}, // a file, not AT_REMOVEDIR
			}})
	}
	return out
}

// names are the calls allowed whatever their arguments: the allow-list,
// and with shares the 9P server's (shareCalls).
func names(p Params) []string {
	var out []string
	for _, g := range allowed {
		out = append(out, g...)
	}
	if len(p.ShareRoots) > 0 {
		out = append(out, shareCalls...)
	}
	return out
}

// AllowListSize returns how many system calls the filter allows, each
// counted once whatever its conditions.
func AllowListSize(p Params) int {
	n := len(names(p))
	seen := map[string]bool{}
	for _, c := range conditioned(p) {
		if !seen[c.Name] {
			seen[c.Name] = true
			n++
		}
	}
	return n
}

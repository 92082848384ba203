package sandbox

import (
	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// The allow-list: every system call a running govm makes, from the moment
// the filter is loaded (just before the vCPUs start) to its exit. Set-up
// (opening /dev/kvm, the kernel, disks, creating taps, mmap of guest RAM)
// happens before and needs nothing here. Grouped by who needs it; a
// contributor who adds a code path that makes a new call finds it with
// --seccomp=audit (see docs/usage.md) and adds it to its group here.
var allowed = [][]string{
	// The vCPU loop: KVM_RUN, KVM_IRQ_LINE, register reads for the exit
	// diagnosis; also TUN, terminal (TCSETS at exit) and FIONREAD ioctls.
	{"ioctl"},
	// Device I/O: disk images (preadv/pwritev, fsync, the flock released
	// by close), the tap (readv/writev, ppoll with a timeout), eventfds
	// (ioeventfd kicks, alarms), the console (read stdin, write stdout).
	{"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
		"fsync", "fdatasync", "flock", "ppoll", "poll", "close", "eventfd2", "lseek",
		"fstat", "newfstatat", "statx", "fcntl", "openat", "unlinkat", "getdents64", "dup", "dup3"},
	// Sockets: tap teardown over netlink (vishvananda/netlink), the control
	// API socket (accept, read, write, shutdown, remove at exit).
	{"socket", "bind", "listen", "accept4", "connect", "sendto", "recvfrom", "sendmsg",
		"recvmsg", "getsockname", "getpeername", "getsockopt", "setsockopt", "shutdown"},
	// The Go runtime: memory (heap growth, stacks, the scavenger), threads
	// (clone below, arch_prctl sets a new thread's TLS), scheduling,
	// signals (preemption by SIGURG, SIGUSR1 stats, SIGINT/SIGTERM, the
	// vCPU kick by tgkill), timers and netpoll, exit.
	{"mmap", "munmap", "mprotect", "madvise", "mremap", "brk",
		"futex", "sched_yield", "sched_getaffinity", "nanosleep", "clock_nanosleep",
		"clock_gettime", "gettimeofday", "getrandom", "getpid", "gettid", "tgkill", "tkill",
		"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "arch_prctl",
		"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "pipe2",
		"restart_syscall", "exit", "exit_group", "uname", "prlimit64", "getrlimit",
		"membarrier", "rseq"},
	// glibc, when govm is built with cgo (the default for a dynamically
	// linked binary): the runtime then starts threads with
	// pthread_create, which registers its robust futex list.
	{"set_robust_list"},
	// GOVM_CPUPROFILE: the profiler's per-thread timers.
	{"setitimer", "timer_create", "timer_settime", "timer_delete"},
}

// threadClone is clone(2) for new threads of this process only
// (CLONE_THREAD, which the Go runtime always passes): no fork, so the
// filter never has to consider what a child would do.
//
// clone3(2) takes its flags in a struct the filter cannot read, so it
// cannot be allowed for threads only; it fails with ENOSYS instead (see
// Filter), which makes glibc's pthread_create (a cgo build starts its
// threads there) fall back to clone(2), as it does on kernels before 5.3.
var threadClone = seccomp.NameWithConditions{
	Name: "clone",
	Conditions: seccomp.ArgumentConditions{{
		Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_THREAD,
	}},
}

// AllowListSize returns how many system calls the filter allows (clone
// with its condition counted once).
func AllowListSize() int {
	n := 1
	for _, g := range allowed {
		n += len(g)
	}
	return n
}

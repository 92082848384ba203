// Package probe makes, one at a time, the system calls a compromised govm
// would want and the seccomp filter must refuse: for sandbox's own tests
// and for govm's hidden probe mode, which the end-to-end tests drive
// through the real binary. Each call is harmless when allowed (audit
// mode): it signals nothing (signal 0), and creates only its own file.
package probe

import "golang.org/x/sys/unix"

// Created is the name of the file the "create" probe makes in its dir.
const Created = "probe-new"

// Call makes probe name's call and returns its error; known is false for a
// name it does not have (the caller's own probes). dir is a directory the
// "create" probe may write Created in.
func Call(name, dir string) (known bool, err error) {
	switch name {
	case "getpriority":
		_, err = unix.Getpriority(unix.PRIO_PROCESS, 0)
	case "open":
		var fd int
		fd, err = unix.Open("/etc/hostname", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
	case "create":
		var fd int
		fd, err = unix.Open(dir+"/"+Created, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		unix.Close(fd)
	case "socket":
		var fd int
		fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		unix.Close(fd)
	case "tgkill-other":
		err = unix.Tgkill(1, 1, 0)
	case "kill":
		err = unix.Kill(1, 0)
	case "mmap-exec":
		var b []byte
		if b, err = unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANON); err == nil {
			unix.Munmap(b)
		}
	case "mprotect-exec":
		var b []byte
		if b, err = unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON); err == nil {
			err = unix.Mprotect(b, unix.PROT_READ|unix.PROT_EXEC)
			unix.Munmap(b)
		}
	case "prlimit-other":
		var old unix.Rlimit
		err = unix.Prlimit(1, unix.RLIMIT_NOFILE, nil, &old)
	case "ioctl-other":
		_, err = unix.IoctlGetInt(0, unix.TIOCINQ) // FIONREAD
	case "dup":
		var fd int
		fd, err = unix.Dup(1)
		unix.Close(fd)
	default:
		return false, nil
	}
	return true, err
}

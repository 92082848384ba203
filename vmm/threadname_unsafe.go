package vmm

import (
	"bytes"
	"unsafe"

	"golang.org/x/sys/unix"
)

// threadName returns the calling thread's name (PR_GET_NAME).
func threadName() (string, error) {
	var buf [16]byte // TASK_COMM_LEN
	// unsafe: PR_GET_NAME writes at most 16 bytes at &buf[0]; buf lives through the call.
	if err := unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&buf[0])), 0, 0, 0); err != nil {
		return "", err
	}
	n := bytes.IndexByte(buf[:], 0)
	if n < 0 {
		n = len(buf)
	}
	return string(buf[:n]), nil
}

// setThreadName names the calling thread (PR_SET_NAME; the kernel keeps 15
// bytes).
func setThreadName(name string) error {
	var buf [16]byte
	copy(buf[:15], name)
	// unsafe: PR_SET_NAME reads a NUL-terminated string at &buf[0]; buf lives through the call.
	return unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&buf[0])), 0, 0, 0)
}

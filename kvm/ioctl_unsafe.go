package kvm

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ioctlPtr issues an ioctl whose argument points at a Go value mirroring a
// kernel struct, retrying EINTR (see ioctl).
func ioctlPtr[T any](fd int, req uintptr, arg *T) (uintptr, error) {
	for {
		// unsafe: the kernel reads/writes *arg, a mirror of the ioctl's struct; the conversion inside the call keeps arg alive.
		r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(arg)))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return r, errno
		}
		return r, nil
	}
}

// ioctlBytes issues an ioctl whose argument is a variable-length struct
// (kvm_cpuid2, kvm_msrs) encoded in buf, retrying EINTR.
func ioctlBytes(fd int, req uintptr, buf []byte) (uintptr, error) {
	for {
		// unsafe: the kernel reads/writes len(buf) bytes at &buf[0]; the conversion inside the call keeps buf alive.
		r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return r, errno
		}
		return r, nil
	}
}

// hostAddr returns the host virtual address of mem[0] for
// kvm_userspace_memory_region.userspace_addr. mem must be memory the Go
// garbage collector never moves or frees while the slot exists (an mmap).
func hostAddr(mem []byte) uint64 {
	// unsafe: KVM needs the address of the guest RAM mapping, not a pointer it dereferences through Go.
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
}

// immediateExitWord returns the 32-bit word at the start of the kvm_run page
// (request_interrupt_window, immediate_exit, padding) so immediate_exit can
// be set and cleared atomically while another thread is inside KVM_RUN.
func immediateExitWord(run []byte) *uint32 {
	// unsafe: run is the page-aligned kvm_run mmap, so its first 4 bytes are an aligned uint32 shared with the kernel.
	return (*uint32)(unsafe.Pointer(unsafe.SliceData(run)))
}

// immediate_exit is byte 1 of struct kvm_run; on little-endian x86 that is
// bits 8-15 of the first word.
const immediateExitMask = 0xff << 8

func setImmediateExit(run []byte) { atomic.OrUint32(immediateExitWord(run), 1<<8) }
func clearImmediateExit(run []byte) {
	atomic.AndUint32(immediateExitWord(run), ^uint32(immediateExitMask))
}
func immediateExit(run []byte) bool {
	return atomic.LoadUint32(immediateExitWord(run))&immediateExitMask != 0
}

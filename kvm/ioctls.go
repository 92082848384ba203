package kvm

import "golang.org/x/sys/unix"

// Every KVM ioctl number govm uses, in one place. They are built the way
// include/uapi/asm-generic/ioctl.h builds them (_IO/_IOR/_IOW/_IOWR with
// KVMIO = 0xAE), and the argument sizes are the sizes of the mirrored kernel
// structs; layout_unsafe_test.go checks both against the kernel's values.

const (
	kvmio = 0xAE

	iocNone  = 0
	iocWrite = 1
	iocRead  = 2

	iocNRShift   = 0
	iocTypeShift = 8
	iocSizeShift = 16
	iocDirShift  = 30
)

func ioc(dir, nr, size uintptr) uintptr {
	return dir<<iocDirShift | size<<iocSizeShift | kvmio<<iocTypeShift | nr<<iocNRShift
}

func io(nr uintptr) uintptr         { return ioc(iocNone, nr, 0) }
func ior(nr, size uintptr) uintptr  { return ioc(iocRead, nr, size) }
func iow(nr, size uintptr) uintptr  { return ioc(iocWrite, nr, size) }
func iowr(nr, size uintptr) uintptr { return ioc(iocRead|iocWrite, nr, size) }

// Argument sizes of the mirrored structs (checked against unsafe.Sizeof).
const (
	sizeofCPUID2         = 8    // struct kvm_cpuid2 header (entries follow)
	sizeofMSRs           = 8    // struct kvm_msrs header (entries follow)
	sizeofUserMemRegion  = 32   // struct kvm_userspace_memory_region
	sizeofIRQLevel       = 8    // struct kvm_irq_level
	sizeofPITConfig      = 64   // struct kvm_pit_config
	sizeofIOEventFD      = 64   // struct kvm_ioeventfd
	sizeofRegs           = 144  // struct kvm_regs
	sizeofSregs          = 312  // struct kvm_sregs
	sizeofFPU            = 416  // struct kvm_fpu
	sizeofLAPIC          = 1024 // struct kvm_lapic_state
	sizeofMPState        = 4    // struct kvm_mp_state
	sizeofVCPUEvents     = 64   // struct kvm_vcpu_events
	sizeofIdentityMapArg = 8    // __u64
)

// System (/dev/kvm) ioctls.
var (
	kvmGetAPIVersion     = io(0x00)
	kvmCreateVM          = io(0x01)
	kvmCheckExtension    = io(0x03)
	kvmGetVCPUMmapSize   = io(0x04)
	kvmGetSupportedCPUID = iowr(0x05, sizeofCPUID2)
)

// VM ioctls.
var (
	kvmCreateVCPU          = io(0x41)
	kvmSetUserMemoryRegion = iow(0x46, sizeofUserMemRegion)
	kvmSetTSSAddr          = io(0x47)
	kvmSetIdentityMapAddr  = iow(0x48, sizeofIdentityMapArg)
	kvmCreateIRQChip       = io(0x60)
	kvmIRQLine             = iow(0x61, sizeofIRQLevel)
	kvmCreatePIT2          = iow(0x77, sizeofPITConfig)
	kvmIOEventFD           = iow(0x79, sizeofIOEventFD)
)

// vCPU ioctls.
var (
	kvmRun        = io(0x80)
	kvmGetRegs    = ior(0x81, sizeofRegs)
	kvmSetRegs    = iow(0x82, sizeofRegs)
	kvmGetSregs   = ior(0x83, sizeofSregs)
	kvmSetSregs   = iow(0x84, sizeofSregs)
	kvmGetMSRs    = iowr(0x88, sizeofMSRs)
	kvmSetMSRs    = iow(0x89, sizeofMSRs)
	kvmGetFPU     = ior(0x8c, sizeofFPU)
	kvmSetFPU     = iow(0x8d, sizeofFPU)
	kvmGetLAPIC   = ior(0x8e, sizeofLAPIC)
	kvmSetLAPIC   = iow(0x8f, sizeofLAPIC)
	kvmSetCPUID2  = iow(0x90, sizeofCPUID2)
	kvmGetMPState = ior(0x98, sizeofMPState)
	kvmSetMPState = iow(0x99, sizeofMPState)

	kvmGetVCPUEvents = ior(0x9f, sizeofVCPUEvents)
	kvmSetVCPUEvents = iow(0xa0, sizeofVCPUEvents)
)

// ioctl issues an ioctl whose argument is an integer (or unused), retrying
// EINTR: every KVM ioctl except KVM_RUN is restartable from the caller's
// point of view, and a signal (Go's SIGURG preemption among them) must not
// turn into a spurious failure.
func ioctl(fd int, req, arg uintptr) (uintptr, error) {
	for {
		r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, arg)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return r, errno
		}
		return r, nil
	}
}

// RunningIoctls are the KVM ioctls a VM makes once its vCPUs run: the vCPU
// loop, interrupt lines, queue notifications (ioeventfds registered and
// removed as drivers set queues up), the exit diagnosis and the emulation
// fix-ups, the halt check. Everything else is set-up, done before a
// sandbox closes the rest (package sandbox allows only these).
func RunningIoctls() []uintptr {
	return []uintptr{kvmRun, kvmIRQLine, kvmIOEventFD, kvmGetRegs, kvmSetRegs, kvmGetSregs,
		kvmGetMPState, kvmGetVCPUEvents, kvmSetVCPUEvents}
}

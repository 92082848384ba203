// Package kvm is a typed wrapper over the Linux KVM API
// (Documentation/virt/kvm/api.rst) for x86-64: a System (/dev/kvm), VMs and
// vCPUs as methods over their file descriptors, kernel structs mirrored one
// for one, and VM exits returned as typed values rather than errors.
//
// Every ioctl except KVM_RUN is retried on EINTR. unsafe is confined to
// *_unsafe.go.
package kvm

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// DefaultPath is where the KVM device lives.
const DefaultPath = "/dev/kvm"

// APIVersion12 is the only stable KVM API version (KVM_GET_API_VERSION).
const APIVersion12 = 12

var (
	// ErrNoKVM is returned when the KVM device cannot be opened because
	// it does not exist, has no driver, or is not accessible.
	ErrNoKVM = errors.New("kvm: no usable KVM device")
	// ErrAPIVersion is returned when KVM_GET_API_VERSION is not 12.
	ErrAPIVersion = errors.New("kvm: unsupported KVM API version")
	// ErrClosed is returned for operations on a closed System, VM or VCPU.
	ErrClosed = errors.New("kvm: file descriptor closed")
)

// Cap is a KVM capability number for CheckExtension (KVM_CAP_*).
type Cap uintptr

// Capabilities govm asks about (values from include/uapi/linux/kvm.h).
const (
	CapIRQChip            Cap = 0
	CapUserMemory         Cap = 3
	CapSetTSSAddr         Cap = 4
	CapExtCPUID           Cap = 7
	CapNrVCPUs            Cap = 9
	CapNrMemSlots         Cap = 10
	CapSyncMMU            Cap = 16
	CapIRQRouting         Cap = 25
	CapIRQFD              Cap = 32
	CapPIT2               Cap = 33
	CapPITState2          Cap = 35
	CapIOEventFD          Cap = 36
	CapSetIdentityMapAddr Cap = 37
	CapXSave              Cap = 55
	CapMaxVCPUs           Cap = 66
	CapTSCDeadlineTimer   Cap = 72
	CapSignalMSI          Cap = 77
	CapReadonlyMem        Cap = 81
	CapIOEventFDAnyLength Cap = 122
	CapMaxVCPUID          Cap = 128
	CapX2APICAPI          Cap = 129
	CapImmediateExit      Cap = 136
)

// System is an open /dev/kvm.
type System struct {
	fd int
}

// Open opens the KVM device at path (DefaultPath if empty) and checks that
// it speaks API version 12.
func Open(path string) (*System, error) {
	if path == "" {
		path = DefaultPath
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, openError(path, err)
	}
	s := &System{fd: fd}
	if _, err := s.APIVersion(); err != nil {
		s.Close()
		if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("%w: %s is not a KVM device (%v); use /dev/kvm", ErrNoKVM, path, err)
		}
		return nil, err
	}
	return s, nil
}

// openError wraps ErrNoKVM with a hint that matches the failure.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		return fmt.Errorf("%w: open %s: %v (is a KVM module loaded? try modprobe kvm_intel or kvm_amd)", ErrNoKVM, path, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w: open %s: %v (add the user to the kvm group or fix the device's permissions)", ErrNoKVM, path, err)
	}
	return fmt.Errorf("kvm: open %s: %w", path, err)
}

// Close closes the device. VMs created from it stay valid.
func (s *System) Close() error {
	if s.fd < 0 {
		return ErrClosed
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

// APIVersion returns KVM_GET_API_VERSION, or an error wrapping ErrAPIVersion
// if it is not 12 (the only version the API has had since Linux 2.6.22).
func (s *System) APIVersion() (int, error) {
	v, err := ioctl(s.fd, kvmGetAPIVersion, 0)
	if err != nil {
		return 0, fmt.Errorf("KVM_GET_API_VERSION: %w", err)
	}
	if v != APIVersion12 {
		return int(v), fmt.Errorf("%w: %d (want %d)", ErrAPIVersion, v, APIVersion12)
	}
	return int(v), nil
}

// CheckExtension returns KVM_CHECK_EXTENSION for c: 0 if unsupported,
// otherwise 1 or a capability-specific value (e.g. a vCPU count).
func (s *System) CheckExtension(c Cap) (int, error) {
	v, err := ioctl(s.fd, kvmCheckExtension, uintptr(c))
	if err != nil {
		return 0, fmt.Errorf("KVM_CHECK_EXTENSION %d: %w", c, err)
	}
	return int(v), nil
}

// maxCPUIDEntries bounds SupportedCPUID's buffer growth; the kernel's own
// limit (KVM_MAX_CPUID_ENTRIES) is 256.
const maxCPUIDEntries = 4096

// SupportedCPUID returns KVM_GET_SUPPORTED_CPUID: every CPUID leaf KVM can
// present to a guest, with the bits it can virtualize. The buffer starts
// small and doubles while the kernel answers E2BIG.
func (s *System) SupportedCPUID() ([]CPUIDEntry, error) {
	for n := 64; n <= maxCPUIDEntries; n *= 2 {
		buf := encodeCPUID2(nil, n)
		_, err := ioctlBytes(s.fd, kvmGetSupportedCPUID, buf)
		if errors.Is(err, unix.E2BIG) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("KVM_GET_SUPPORTED_CPUID: %w", err)
		}
		return decodeCPUID2(buf)
	}
	return nil, fmt.Errorf("KVM_GET_SUPPORTED_CPUID: more than %d entries: %w", maxCPUIDEntries, unix.E2BIG)
}

// CreateVM creates a VM (KVM_CREATE_VM, machine type 0) and records the
// kvm_run mapping size its vCPUs will need (KVM_GET_VCPU_MMAP_SIZE).
func (s *System) CreateVM() (*VM, error) {
	size, err := ioctl(s.fd, kvmGetVCPUMmapSize, 0)
	if err != nil {
		return nil, fmt.Errorf("KVM_GET_VCPU_MMAP_SIZE: %w", err)
	}
	if size < minRunSize {
		return nil, fmt.Errorf("kvm: KVM_GET_VCPU_MMAP_SIZE %d is smaller than struct kvm_run (%d)", size, minRunSize)
	}
	fd, err := ioctl(s.fd, kvmCreateVM, 0)
	if err != nil {
		return nil, fmt.Errorf("KVM_CREATE_VM: %w", err)
	}
	return &VM{fd: int(fd), mmapSize: int(size)}, nil
}

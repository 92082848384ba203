package kvm

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Memory-slot flags for SetUserMemoryRegion (KVM_MEM_*).
const (
	MemLogDirtyPages = 1 << 0
	MemReadonly      = 1 << 1
)

// VM is a virtual machine: guest memory slots, the in-kernel irqchip and
// PIT, ioeventfds, and its vCPUs.
type VM struct {
	fd       int
	mmapSize int // KVM_GET_VCPU_MMAP_SIZE, the kvm_run mapping length
}

// Close closes the VM fd. The kernel frees the VM once its vCPUs are closed
// too.
func (vm *VM) Close() error {
	if vm.fd < 0 {
		return ErrClosed
	}
	err := unix.Close(vm.fd)
	vm.fd = -1
	return err
}

// SetTSSAddr places the three pages Intel VMX needs for real-mode emulation
// (KVM_SET_TSS_ADDR). They must be inside the guest physical address space
// but outside RAM and MMIO (govm uses layout.KVMTSSAddr).
func (vm *VM) SetTSSAddr(addr uint64) error {
	if _, err := ioctl(vm.fd, kvmSetTSSAddr, uintptr(addr)); err != nil {
		return fmt.Errorf("KVM_SET_TSS_ADDR %#x: %w", addr, err)
	}
	return nil
}

// SetIdentityMapAddr places the one-page EPT identity map VMX uses for
// unpaged guest modes (KVM_SET_IDENTITY_MAP_ADDR; govm uses
// layout.KVMIdentityMapAddr). Call it before creating vCPUs.
func (vm *VM) SetIdentityMapAddr(addr uint64) error {
	a := addr
	if _, err := ioctlPtr(vm.fd, kvmSetIdentityMapAddr, &a); err != nil {
		return fmt.Errorf("KVM_SET_IDENTITY_MAP_ADDR %#x: %w", addr, err)
	}
	return nil
}

// CreateIRQChip creates the in-kernel PIC pair, IOAPIC and per-vCPU local
// APICs (KVM_CREATE_IRQCHIP), with the default GSI routing (GSI 0-15 to
// both the PICs and IOAPIC pins, 16-23 to the IOAPIC). Call it before
// creating vCPUs.
func (vm *VM) CreateIRQChip() error {
	if _, err := ioctl(vm.fd, kvmCreateIRQChip, 0); err != nil {
		return fmt.Errorf("KVM_CREATE_IRQCHIP: %w", err)
	}
	return nil
}

// CreatePIT2 creates the in-kernel i8254 PIT on ports 0x40-0x43 wired to
// GSI 0 (KVM_CREATE_PIT2, flags 0: no speaker port dummy). Requires the
// irqchip.
func (vm *VM) CreatePIT2() error {
	var cfg pitConfig
	if _, err := ioctlPtr(vm.fd, kvmCreatePIT2, &cfg); err != nil {
		return fmt.Errorf("KVM_CREATE_PIT2: %w", err)
	}
	return nil
}

// SetUserMemoryRegion maps mem at guest physical address gpa in slot
// (KVM_SET_USER_MEMORY_REGION). mem must stay mapped, unmoved, for as long
// as the slot exists: pass an mmap'd region, never a Go-allocated slice. An
// empty mem deletes the slot. flags is a mask of MemLogDirtyPages,
// MemReadonly.
func (vm *VM) SetUserMemoryRegion(slot uint32, gpa uint64, mem []byte, flags uint32) error {
	r := userspaceMemoryRegion{Slot: slot, Flags: flags, GuestPhysAddr: gpa, MemorySize: uint64(len(mem))}
	if len(mem) > 0 {
		r.UserspaceAddr = hostAddr(mem)
	}
	if _, err := ioctlPtr(vm.fd, kvmSetUserMemoryRegion, &r); err != nil {
		return fmt.Errorf("KVM_SET_USER_MEMORY_REGION slot %d gpa %#x size %#x: %w", slot, gpa, len(mem), err)
	}
	return nil
}

// IRQLine drives GSI gsi of the in-kernel irqchip to level (KVM_IRQ_LINE).
// Lines are level-triggered: raise and later lower them. Safe for
// concurrent use; *VM satisfies irq.Chip.
func (vm *VM) IRQLine(gsi uint32, level bool) error {
	l := irqLevel{IRQ: gsi}
	if level {
		l.Level = 1
	}
	if _, err := ioctlPtr(vm.fd, kvmIRQLine, &l); err != nil {
		return fmt.Errorf("KVM_IRQ_LINE gsi %d level %v: %w", gsi, level, err)
	}
	return nil
}

// RegisterIOEventFD makes a guest write of length bytes (0 = any length) to
// addr (an I/O port if pio, else MMIO) signal eventfd fd in the kernel
// instead of exiting to userspace (KVM_IOEVENTFD, no datamatch).
func (vm *VM) RegisterIOEventFD(addr uint64, length uint32, fd int, pio bool) error {
	return vm.ioeventfd(addr, length, fd, pio, false)
}

// UnregisterIOEventFD removes a registration made by RegisterIOEventFD with
// the same arguments.
func (vm *VM) UnregisterIOEventFD(addr uint64, length uint32, fd int, pio bool) error {
	return vm.ioeventfd(addr, length, fd, pio, true)
}

// RegisterIOEventFDMatch is RegisterIOEventFD restricted to writes of the
// value data (KVM_IOEVENTFD_FLAG_DATAMATCH): one eventfd per virtqueue on a
// shared notify register, so a kick wakes only its queue.
func (vm *VM) RegisterIOEventFDMatch(addr uint64, length uint32, fd int, pio bool, data uint64) error {
	return vm.ioeventfdMatch(addr, length, fd, pio, false, &data)
}

// UnregisterIOEventFDMatch removes a registration made by
// RegisterIOEventFDMatch with the same arguments.
func (vm *VM) UnregisterIOEventFDMatch(addr uint64, length uint32, fd int, pio bool, data uint64) error {
	return vm.ioeventfdMatch(addr, length, fd, pio, true, &data)
}

func (vm *VM) ioeventfd(addr uint64, length uint32, fd int, pio, deassign bool) error {
	return vm.ioeventfdMatch(addr, length, fd, pio, deassign, nil)
}

func (vm *VM) ioeventfdMatch(addr uint64, length uint32, fd int, pio, deassign bool, data *uint64) error {
	e := ioeventfd{Addr: addr, Len: length, FD: int32(fd)}
	if data != nil {
		e.Datamatch = *data
		e.Flags |= ioeventfdFlagDatamatch
	}
	if pio {
		e.Flags |= ioeventfdFlagPIO
	}
	if deassign {
		e.Flags |= ioeventfdFlagDeassign
	}
	if _, err := ioctlPtr(vm.fd, kvmIOEventFD, &e); err != nil {
		return fmt.Errorf("KVM_IOEVENTFD addr %#x len %d pio %v deassign %v: %w", addr, length, pio, deassign, err)
	}
	return nil
}

// CreateVCPU creates vCPU id (KVM_CREATE_VCPU) and maps its kvm_run page.
// vCPU 0 is the bootstrap processor.
func (vm *VM) CreateVCPU(id int) (*VCPU, error) {
	fd, err := ioctl(vm.fd, kvmCreateVCPU, uintptr(id))
	if err != nil {
		return nil, fmt.Errorf("KVM_CREATE_VCPU %d: %w", id, err)
	}
	run, err := unix.Mmap(int(fd), 0, vm.mmapSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(int(fd))
		return nil, fmt.Errorf("kvm: mmap kvm_run of vcpu %d: %w", id, err)
	}
	return &VCPU{fd: int(fd), id: id, run: run, pid: unix.Getpid()}, nil
}

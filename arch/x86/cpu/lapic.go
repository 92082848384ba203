package cpu

import (
	"github.com/govm/govm/kvm"
)

// Local APIC register offsets and LVT delivery modes (Intel SDM vol. 3A,
// 10.5.1).
const (
	lapicLVT0         = 0x350 // LVT LINT0
	lapicLVT1         = 0x360 // LVT LINT1
	lvtDeliveryMask   = 0x7 << 8
	lvtDeliveryNMI    = 0x4 << 8
	lvtDeliveryExtINT = 0x7 << 8
)

// VirtualWireLVT returns the LINT0 and LINT1 LVT values for virtual-wire
// mode (Intel MP spec 1.4, 3.6.2.2): LINT0 delivers the 8259's interrupts
// as ExtINT, LINT1 delivers NMI. Other fields (mask, trigger) are kept.
func VirtualWireLVT(lint0, lint1 uint32) (uint32, uint32) {
	return lint0&^lvtDeliveryMask | lvtDeliveryExtINT, lint1&^lvtDeliveryMask | lvtDeliveryNMI
}

// SetupLAPIC programs LVT LINT0 as ExtINT and LINT1 as NMI so the in-kernel
// 8259 PIC reaches the vCPU through its local APIC (virtual-wire mode)
// until the guest switches to the IOAPIC. Requires the in-kernel irqchip.
func SetupLAPIC(v *kvm.VCPU) error {
	l, err := v.GetLAPIC()
	if err != nil {
		return err // kvm names the ioctl and the vCPU
	}
	lint0, lint1 := VirtualWireLVT(l.Reg(lapicLVT0), l.Reg(lapicLVT1))
	l.SetReg(lapicLVT0, lint0)
	l.SetReg(lapicLVT1, lint1)
	if err := v.SetLAPIC(l); err != nil {
		return err // kvm names the ioctl and the vCPU
	}
	return nil
}

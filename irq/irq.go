// Package irq models interrupt lines into the in-kernel irqchip.
package irq

import "fmt"

// Line is one level-triggered interrupt line. Set(true) asserts it, Set(false)
// deasserts it. Implementations must be safe for concurrent use.
type Line interface {
	Set(level bool) error
}

// Chip is what drives a line; *kvm.VM satisfies it with KVM_IRQ_LINE.
type Chip interface {
	IRQLine(gsi uint32, level bool) error
}

// KVMLine is a Line on a GSI of an in-kernel irqchip (KVM_IRQ_LINE).
type KVMLine struct {
	Chip Chip
	GSI  uint32
}

// Set drives the GSI to level.
func (l KVMLine) Set(level bool) error {
	if err := l.Chip.IRQLine(l.GSI, level); err != nil {
		return fmt.Errorf("irq: gsi %d level %v: %w", l.GSI, level, err)
	}
	return nil
}

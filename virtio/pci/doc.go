// Package virtiopci is the legacy virtio-PCI transport (virtio 1.x spec
// 4.1.4.8 "Legacy Interfaces: A Note on PCI Device Layout"): a pci.Device
// that wraps a virtio.Device, owns the ISR byte and the interrupt line, and
// turns QUEUE_NOTIFY writes (port exits or KVM ioeventfds) into kicks. The
// device it carries never knows which transport that is.
package virtiopci

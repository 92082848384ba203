package vmm

import (
	virtioblk "github.com/govm/govm/virtio/blk"
)

// openDisk opens a --disk image (locked against a second writer) and builds
// its virtio-blk device. The image closes (and its lock goes) with the VM.
func (m *Machine) openDisk(d DiskConfig, what string) (*virtioblk.Device, error) {
	f, err := virtioblk.OpenFile(d.Path, d.ReadOnly)
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) { m.logf(what+": "+format, args...) }
	dev, err := virtioblk.New(f, virtioblk.Config{ReadOnly: d.ReadOnly, Serial: d.Serial, Log: logf})
	if err != nil {
		f.Close()
		return nil, err
	}
	// Registered before the device's own closer, so it runs after the
	// device has stopped using the file.
	m.closers = append(m.closers, func() { f.Close() })
	return dev, nil
}

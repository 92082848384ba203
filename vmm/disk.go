package vmm

import (
	virtioblk "github.com/govm/govm/virtio/blk"
)

// openDisk opens a --disk image (locked against a second writer) and builds
// its virtio-blk device over it. The caller owns the file: addVirtio
// registers it with the device, which closes it last.
func (m *Machine) openDisk(d DiskConfig, what string) (*virtioblk.Device, *virtioblk.File, error) {
	f, err := virtioblk.OpenFile(d.Path, d.ReadOnly)
	if err != nil {
		// OpenFile's errors name the path.
		return nil, nil, inputErrorf("--disk: %w", err)
	}
	cfg := d.blkConfig()
	cfg.PollMax = m.cfg.PollMax
	cfg.Log = func(format string, args ...any) { m.logf(what+": "+format, args...) }
	dev, err := virtioblk.New(f, cfg)
	if err != nil {
		f.Close()
		return nil, nil, inputErrorf("--disk %s: %w", d.Path, err)
	}
	// virtio-blk counts in 512-byte sectors (spec 5.2.4, capacity): a
	// tail shorter than a sector is out of the guest's reach.
	if size, err := f.Size(); err == nil && size%virtioblk.SectorSize != 0 {
		m.logf("%s: %d bytes is not a multiple of %d: the guest sees %d bytes, not the last %d", what,
			size, virtioblk.SectorSize, size-size%virtioblk.SectorSize, size%virtioblk.SectorSize)
	}
	return dev, f, nil
}

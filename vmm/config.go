package vmm

import (
	"os"

	"github.com/govm/govm/mptable"
	virtioblk "github.com/govm/govm/virtio/blk"
)

// check validates what the user asked for before New acquires anything, so
// bad input fails fast, as one line, and nothing is left to undo. This is
// the one place for these rules (the CLI checks only the syntax of its
// flags); limits that only the host knows (KVM's vCPU count) are checked
// where the host is asked.
func (cfg *Config) check() error {
	// The MP table gives each vCPU a LAPIC ID below the IOAPIC's.
	if cfg.CPUs < 1 || cfg.CPUs > mptable.MaxCPUs {
		return inputErrorf("--cpus %d: must be between 1 and %d", cfg.CPUs, mptable.MaxCPUs)
	}
	if err := checkMemSize(cfg.MemSize); err != nil {
		return err
	}
	if _, err := os.Stat(cfg.Kernel); err != nil {
		return inputErrorf("kernel: %w", err)
	}
	for _, d := range cfg.Disks {
		if err := d.blkConfig().Validate(); err != nil {
			return inputErrorf("--disk %s: %w", d.Path, err)
		}
	}
	return nil
}

// blkConfig is the virtio-blk device configuration d asks for.
func (d DiskConfig) blkConfig() virtioblk.Config {
	return virtioblk.Config{ReadOnly: d.ReadOnly, Serial: d.Serial, Withhold: d.Withhold}
}

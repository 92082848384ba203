package vmm

import (
	"os"
	"strings"

	"github.com/govm/govm/arch/x86/mptable"
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
	if err := checkImage("kernel", cfg.Kernel, cfg.MemSize); err != nil {
		return err
	}
	if cfg.Initrd != "" {
		if err := checkImage("initrd", cfg.Initrd, cfg.MemSize); err != nil {
			return err
		}
	}
	for _, d := range cfg.Disks {
		if err := d.blkConfig().Validate(); err != nil {
			return inputErrorf("--disk %s: %w", d.Path, err)
		}
	}
	return nil
}

// checkImage requires a kernel or initrd that govm can read whole into
// guest RAM: a regular file (a FIFO would block the read for ever, a
// device such as /dev/zero never ends) no larger than RAM.
func checkImage(what, path string, mem uint64) error {
	st, err := os.Stat(path)
	if err != nil {
		return inputErrorf("%s: %w", what, err)
	}
	if !st.Mode().IsRegular() {
		return inputErrorf("%s %s is not a regular file (%s); give the path of a file", what, path, fileKind(st.Mode()))
	}
	if uint64(st.Size()) > mem {
		return inputErrorf("%s %s is %d MiB, more than the guest's %d MiB of RAM; use a larger --mem", what, path,
			(st.Size()+(1<<20)-1)>>20, mem>>20)
	}
	return nil
}

// fileKind names the kind of file a non-regular mode is.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

// blkConfig is the virtio-blk device configuration d asks for.
func (d DiskConfig) blkConfig() virtioblk.Config {
	return virtioblk.Config{ReadOnly: d.ReadOnly, Serial: d.Serial, Withhold: d.Withhold}
}

// KernelParams is govm's default guest command line, prepended to the
// user's (like kvmtool's), for the machine govm assembles:
// console on COM1 from the first line, reboot through the i8042 (which ends
// govm), no ACPI (govm describes the machine with an MP table), PCI
// configuration mechanism 1, and i8042 options that skip the slow probes of
// devices govm does not have.
const KernelParams = "console=ttyS0 earlyprintk=serial,ttyS0,115200 reboot=k panic=1 pci=conf1 acpi=off " +
	"i8042.direct=1 i8042.dumbkbd=1 i8042.nopnp=1 i8042.noaux=1"

// VirtioConsoleParams is params with the console on the virtio-console
// (hvc0) instead of COM1: earlyprintk stays on the serial port, so the
// messages before the virtio driver binds still show, and Linux does not
// print them twice (a boot console's messages are not replayed on the
// real console that replaces it).
func VirtioConsoleParams(params string) string {
	return strings.Replace(params, "console=ttyS0", "console=hvc0", 1)
}

package vmm

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/bootparam"
	"github.com/govm/govm/guestmem"
)

// bootInfo is what loading the kernel produced, for the log line and the
// vCPU set-up.
type bootInfo struct {
	entry      uint64
	format     string
	initrdAddr uint64
	initrdSize uint64
	cmdline    string
}

// loadKernel loads the kernel, initrd, command line and zero page into guest
// memory following the Linux x86 boot protocol (Documentation/x86/boot.rst).
func loadKernel(cfg *Config, mem *guestmem.Memory, memSize uint64) (*bootInfo, error) {
	img, err := readBounded(cfg.Kernel, memSize)
	if err != nil {
		return nil, inputErrorf("kernel: %w", err)
	}
	var cache bootparam.PayloadCache
	if cfg.KernelCacheDir != "" {
		cache = &kernelCache{dir: cfg.KernelCacheDir, keep: 4}
	}
	k, err := bootparam.LoadCached(img, cache)
	if err != nil {
		return nil, inputErrorf("kernel %s: %w", cfg.Kernel, err)
	}
	// k.End covers what the kernel occupies while booting, including a
	// self-decompressing kernel's init_size area beyond its segments.
	if k.End > memSize || k.End > layout.PCIHoleStart {
		return nil, inputErrorf("kernel %s needs RAM up to %d MiB to boot; use a larger --mem", cfg.Kernel, (k.End+(1<<20)-1)>>20)
	}
	for _, s := range k.Segments {
		if s.MemSize < uint64(len(s.Data)) {
			return nil, inputErrorf("kernel %s: segment at %#x has memsz < filesz", cfg.Kernel, s.GPA)
		}
		dst, err := mem.Slice(s.GPA, s.MemSize)
		if err != nil {
			return nil, inputErrorf("kernel %s: segment [%#x, +%#x) does not fit in %d MiB of RAM; use a larger --mem: %w",
				cfg.Kernel, s.GPA, s.MemSize, memSize>>20, err)
		}
		n := copy(dst, s.Data)
		clear(dst[n:])
	}

	cmdline, err := bootparam.BuildCmdline(cfg.DefaultParams, cfg.Params, k.Header.CmdlineLimit())
	if err != nil {
		return nil, inputErrorf("%w", err)
	}
	// The line and its NUL must end below the EBDA, the next thing in the
	// map: a kernel whose cmdline_size claims more room than govm has
	// there would otherwise get a line the MP table later overwrites.
	if room := uint64(layout.EBDAStart - layout.CmdlineAddr); uint64(len(cmdline))+1 > room {
		return nil, inputErrorf("command line of %d bytes does not fit in the %d bytes govm has for it at %#x",
			len(cmdline), room-1, layout.CmdlineAddr)
	}
	if err := mem.WriteAt(append([]byte(cmdline), 0), layout.CmdlineAddr); err != nil {
		return nil, fmt.Errorf("vmm: writing command line: %w", err)
	}

	bi := &bootInfo{entry: k.Entry, format: k.Format, cmdline: cmdline}
	if k.DecompressTime > 0 {
		bi.format += fmt.Sprintf(", decompressed on the host in %v", k.DecompressTime.Round(time.Millisecond))
	}
	if cfg.Initrd != "" {
		initrd, err := readBounded(cfg.Initrd, memSize)
		if err != nil {
			return nil, inputErrorf("initrd: %w", err)
		}
		addr, err := bootparam.InitrdAddr(k.Header, memSize, uint64(len(initrd)), k.End)
		if err != nil {
			return nil, inputErrorf("initrd %s: %w", cfg.Initrd, err)
		}
		if err := mem.WriteAt(initrd, addr); err != nil {
			return nil, inputErrorf("initrd %s at %#x: %w", cfg.Initrd, addr, err)
		}
		bi.initrdAddr, bi.initrdSize = addr, uint64(len(initrd))
	}

	zp, err := bootparam.BuildZeroPage(bootparam.ZeroPageConfig{
		Header:      k.Header,
		CmdlineAddr: layout.CmdlineAddr,
		CmdlineLen:  uint32(len(cmdline)),
		InitrdAddr:  bi.initrdAddr,
		InitrdSize:  bi.initrdSize,
		E820:        bootparam.E820Map(memSize),
	})
	if err != nil {
		return nil, err
	}
	if err := mem.WriteAt(zp, layout.ZeroPageAddr); err != nil {
		return nil, fmt.Errorf("vmm: writing zero page: %w", err)
	}
	return bi, nil
}

// readBounded reads the file at path, which Config.check found regular and
// no larger than max; it reads at most max bytes all the same (the file
// may have grown since, or been replaced).
func readBounded(path string, max uint64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if uint64(len(b)) > max {
		return nil, fmt.Errorf("%s grew beyond %d MiB while govm read it", path, max>>20)
	}
	return b, nil
}

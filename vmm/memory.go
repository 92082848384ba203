package vmm

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/guestmem"
)

// minMemSize is the smallest --mem: below it not even the test kernel fits.
// (Guest addresses are package layout's.)
const minMemSize = 16 << 20

// ErrMemSize is returned for a --mem that cannot work.
var ErrMemSize = errors.New("vmm: bad memory size")

// ram is guest RAM: one anonymous host mapping split around the PCI hole.
type ram struct {
	host []byte
	mem  *guestmem.Memory
}

// checkMemSize validates a requested RAM size against govm's limits and the
// host's physical memory.
func checkMemSize(size uint64) error {
	if size < minMemSize {
		return fmt.Errorf("%w: %d MiB is too small; use --mem %dM or more", ErrMemSize, size>>20, minMemSize>>20)
	}
	if size%(2<<20) != 0 {
		return fmt.Errorf("%w: %d bytes is not a multiple of 2 MiB; use e.g. --mem %dM", ErrMemSize, size, (size>>20)+1)
	}
	total, err := HostMemTotal()
	if err == nil && size > total {
		return fmt.Errorf("%w: %d MiB is more than the host's %d MiB; use a smaller --mem", ErrMemSize, size>>20, total>>20)
	}
	return nil
}

// HostMemTotal is the host's physical memory in bytes (MemTotal in
// /proc/meminfo): the ceiling for --mem, and what the e2e tests read to
// skip a size the host cannot give.
func HostMemTotal() (uint64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("vmm: no MemTotal in /proc/meminfo")
}

// allocRAM maps size bytes of anonymous memory (touched lazily, so a large
// --mem costs only what the guest uses) and splits it at the PCI hole: the
// first min(size, layout.PCIHoleStart) at GPA 0, the rest at
// layout.HighRAMStart.
func allocRAM(size uint64) (*ram, error) {
	host, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		// MAP_NORESERVE commits no memory, so ENOMEM here is the
		// address space: a limit (RLIMIT_AS) or, rarely, no hole.
		hint := ""
		if errors.Is(err, unix.ENOMEM) {
			hint = " (is the address space limited? see ulimit -v; or use a smaller --mem)"
		}
		return nil, fmt.Errorf("vmm: mmap %d MiB of guest RAM: %w%s", size>>20, err, hint)
	}
	// Back the guest with transparent huge pages where the host allows it:
	// fewer TLB misses and faster faulting of a large RAM.
	_ = unix.Madvise(host, unix.MADV_HUGEPAGE)
	regions := []guestmem.Region{{GPA: 0, Host: host[:min(size, layout.PCIHoleStart)]}}
	if size > layout.PCIHoleStart {
		regions = append(regions, guestmem.Region{GPA: layout.HighRAMStart, Host: host[layout.PCIHoleStart:]})
	}
	mem, err := guestmem.New(regions...)
	if err != nil {
		_ = unix.Munmap(host)
		return nil, err
	}
	return &ram{host: host, mem: mem}, nil
}

func (r *ram) free() {
	if r.host != nil {
		_ = unix.Munmap(r.host)
		r.host = nil
	}
}

package vmm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/kvm"
	virtiopci "github.com/govm/govm/virtio/pci"
)

func TestUnemulated(t *testing.T) {
	cases := []struct {
		bytes []byte
		want  string
	}{
		{[]byte{0x48, 0x0f, 0xae, 0x2f}, "xrstor"},           // xrstor (%rdi) with REX.W
		{[]byte{0x0f, 0xae, 0x27}, "xsave"},                  // xsave (%rdi)
		{[]byte{0xf0, 0x48, 0x0f, 0xc7, 0x0e}, "cmpxchg16b"}, // lock cmpxchg16b (%rsi)
		{[]byte{0xf0, 0x0f, 0xc7, 0x0e}, "cmpxchg8b"},
		{[]byte{0xcc}, "int3"},
		{[]byte{0x0f, 0xae, 0x54, 0x24, 0x04}, "ldmxcsr"}, // ldmxcsr 0x4(%rsp), where Debian's kernel died
		{[]byte{0x0f, 0xae, 0x5c, 0x24, 0x04}, "stmxcsr"},
		{[]byte{0x0f, 0xae, 0xf0}, ""}, // mfence: register form, not xsave
		{[]byte{0x90}, ""},
		{nil, ""},
	}
	for _, c := range cases {
		if got := unemulated(c.bytes); got != c.want {
			t.Errorf("unemulated(% x) = %q, want %q", c.bytes, got, c.want)
		}
	}
}

func TestWalkPageTables(t *testing.T) {
	mem, err := guestmem.New(guestmem.Region{GPA: 0, Host: make([]byte, 8<<20)})
	if err != nil {
		t.Fatal(err)
	}
	put := func(gpa, v uint64) {
		b, _ := mem.Slice(gpa, 8)
		binary.LittleEndian.PutUint64(b, v)
	}
	const pml4, pdpt, pd, pt = 0x1000, 0x2000, 0x3000, 0x4000
	// Map 0xffffffff81000000 (PML4 511, PDPT 510, PD 8) with a 2 MiB page
	// to 0x400000, and 0x1000 via a 4 KiB page to 0x5000.
	put(pml4+511*8, pdpt|3)
	put(pdpt+510*8, pd|3)
	put(pd+8*8, 0x400000|0x83)
	put(pml4, pdpt|3) // PML4[0] shares the PDPT: PDPT[0] -> PD 0x6000
	put(pdpt, 0x6000|3)
	put(0x6000, pt|3)
	put(pt+1*8, 0x5000|3)
	const cr4PAE, eferLMA = 1 << 5, 1 << 10
	for _, c := range []struct {
		lin, want uint64
		ok        bool
	}{
		{0xffffffff81000123, 0x400123, true},
		{0x1abc, 0x5abc, true},
		{0x2000, 0, false},                // PTE not present
		{0x0000_7f00_0000_0000, 0, false}, // PML4 entry not present
	} {
		got, ok := walkPageTables(mem, pml4, cr4PAE, eferLMA, c.lin)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("walk(%#x) = %#x, %v; want %#x, %v", c.lin, got, ok, c.want, c.ok)
		}
	}
	// A hostile CR3 outside RAM fails cleanly.
	if _, ok := walkPageTables(mem, 1<<40, cr4PAE, eferLMA, 0x1000); ok {
		t.Error("walk with CR3 outside RAM succeeded")
	}
}

func TestCheckMemSize(t *testing.T) {
	for _, c := range []struct {
		size uint64
		ok   bool
	}{
		{64 << 20, true},
		{1 << 20, false},
		{64<<20 + 4096, false},
		{1 << 50, false},
	} {
		err := checkMemSize(c.size)
		if (err == nil) != c.ok {
			t.Errorf("checkMemSize(%d) = %v, want ok=%v", c.size, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrMemSize) {
			t.Errorf("checkMemSize(%d): %v is not ErrMemSize", c.size, err)
		}
	}
}

// TestMemSizeAdvice: the size a too-small --mem error advises is the
// smallest one checkMemSize accepts (the message once said 64M while 16M
// was the limit).
func TestMemSizeAdvice(t *testing.T) {
	err := checkMemSize(1 << 20)
	if err == nil {
		t.Fatal("checkMemSize(1 MiB) accepted")
	}
	var mib uint64
	i := strings.Index(err.Error(), "use --mem ")
	if i < 0 {
		t.Fatalf("%q: no --mem advice", err)
	}
	if _, serr := fmt.Sscanf(err.Error()[i:], "use --mem %dM or more", &mib); serr != nil {
		t.Fatalf("%q: no \"use --mem NM or more\" advice: %v", err, serr)
	}
	if err := checkMemSize(mib << 20); err != nil {
		t.Errorf("advised --mem %dM is refused: %v", mib, err)
	}
	if err := checkMemSize((mib - 2) << 20); err == nil {
		t.Errorf("advised --mem %dM is not the minimum: %dM is accepted too", mib, mib-2)
	}
}

func TestAllocRAMSplitsAtPCIHole(t *testing.T) {
	r, err := allocRAM(3<<30 + 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.free()
	rs := r.mem.Regions()
	if len(rs) != 2 || rs[0].GPA != 0 || len(rs[0].Host) != 3<<30 || rs[1].GPA != 4<<30 || len(rs[1].Host) != 64<<20 {
		t.Fatalf("regions: %d, %#x+%#x ...", len(rs), rs[0].GPA, len(rs[0].Host))
	}
	if _, err := r.mem.Slice(3<<30, 1); err == nil {
		t.Fatal("the PCI hole is backed by RAM")
	}
}

func TestInputErrorIs(t *testing.T) {
	err := inputErrorf("kernel %s: %w", "x", ErrMemSize)
	if !errors.Is(err, ErrInput) || !errors.Is(err, ErrMemSize) || !IsInputError(err) {
		t.Fatalf("%v: Is(ErrInput)=%v", err, errors.Is(err, ErrInput))
	}
	if err.Error() != "kernel x: "+ErrMemSize.Error() {
		t.Fatalf("message %q carries more than the cause", err)
	}
}

// newTestMachine builds (but does not run) a machine with the test kernel
// and one disk. It needs /dev/kvm and GOVM_TEST_KERNEL (make test sets it).
func newTestMachine(t *testing.T) *Machine {
	t.Helper()
	kernel := os.Getenv("GOVM_TEST_KERNEL")
	if kernel == "" {
		t.Skip("GOVM_TEST_KERNEL not set (make test sets it)")
	}
	if _, err := os.Stat(kvm.DefaultPath); err != nil {
		t.Skipf("no KVM: %v", err)
	}
	disk := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(disk, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Kernel: kernel, MemSize: 64 << 20, CPUs: 1, Disks: []DiskConfig{{Path: disk}}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Stats after Close read nothing, instead of ring indexes in RAM that is
// no longer mapped (a SIGUSR1 print racing govm's exit).
func TestDeviceStatsAfterClose(t *testing.T) {
	m := newTestMachine(t)
	// Give the disk's queue rings, as a driver does, so Stats reads RAM.
	bar := m.slots[0].dev.BARIO()
	bar.Write(virtiopci.LegacyQueueSelect, []byte{0, 0})
	bar.Write(virtiopci.LegacyQueuePFN, []byte{0x10, 0, 0, 0})
	before := m.DeviceStats()
	if len(before) != 2 || !strings.Contains(before[0], "requests avail 0 used 0") || !strings.HasPrefix(before[1], "disk 0: ") || !strings.Contains(before[1], "host errors") {
		t.Fatalf("stats before Close: %q", before)
	}
	m.Close()
	if after := m.DeviceStats(); after != nil {
		t.Fatalf("stats after Close: %q", after)
	}
	m.Close() // idempotent
}

// TestHostMemTotal: /proc/meminfo's MemTotal is the kernel's totalram, which
// sysinfo(2) reports too; the two must agree to the byte.
func TestHostMemTotal(t *testing.T) {
	got, err := HostMemTotal()
	if err != nil {
		t.Fatal(err)
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	if want := uint64(si.Totalram) * uint64(si.Unit); got != want {
		t.Fatalf("HostMemTotal = %d, sysinfo totalram = %d", got, want)
	}
}

// A kernel whose header claims a cmdline_size larger than the room between
// layout.CmdlineAddr and the EBDA gets a clear input error for a line that
// would not fit, not a line written over the EBDA and BIOS area.
func TestLoadKernelCmdlineRoom(t *testing.T) {
	kernel := os.Getenv("GOVM_TEST_KERNEL")
	if kernel == "" {
		t.Skip("GOVM_TEST_KERNEL not set (make test sets it)")
	}
	img, err := os.ReadFile(kernel)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(img[0x238:], 0xffff_ffff) // cmdline_size
	patched := filepath.Join(t.TempDir(), "bzImage")
	if err := os.WriteFile(patched, img, 0o600); err != nil {
		t.Fatal(err)
	}
	const size = 16 << 20
	mem, err := guestmem.New(guestmem.Region{GPA: 0, Host: make([]byte, size)})
	if err != nil {
		t.Fatal(err)
	}
	room := layout.EBDAStart - layout.CmdlineAddr
	for _, tc := range []struct {
		n  int
		ok bool
	}{{room - 1, true}, {room, false}} {
		cfg := &Config{Kernel: patched, Params: strings.Repeat("a", tc.n)}
		_, err := loadKernel(cfg, mem, size)
		if tc.ok != (err == nil) || err != nil && (!IsInputError(err) || !strings.Contains(err.Error(), "does not fit")) {
			t.Errorf("command line of %d bytes (room %d): err = %v", tc.n, room, err)
		}
	}
}

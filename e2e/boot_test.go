package e2e

import (
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govm/govm/arch/x86/cpu"
	"github.com/govm/govm/vmm"
)

// TestBootCommandLineRoundTrip: the command line the test kernel reads
// from boot_params is byte for byte what govm was given, with and without
// govm's defaults.
func TestBootCommandLineRoundTrip(t *testing.T) {
	needKVM(t)
	user := `test=boot quoted="a b" utf8=héllo x=1,2,3 last`
	o := bootTest(t, user)
	got, err := hex.DecodeString(result(t, o, "cmdline").KV["hex"])
	if err != nil || string(got) != user {
		t.Fatalf("guest saw command line %q (%v), want %q", got, err, user)
	}

	// With defaults: govm prepends them, and what an emulation-only host
	// needs, separated by one space.
	o = govm(t, 120*time.Second, "run", "--kernel", testKernel, "--debug-exit", "-p", "test=boot")
	got, _ = hex.DecodeString(result(t, o, "cmdline").KV["hex"])
	want := vmm.KernelParams + " test=boot"
	if hostEmulationOnly() {
		want = vmm.KernelParams + " " + cpu.EmulatorParams + " test=boot"
	}
	if string(got) != want {
		t.Fatalf("guest saw %q, want %q", got, want)
	}
}

// TestBootE820 checks the memory map the guest reads matches --mem.
func TestBootE820(t *testing.T) {
	needKVM(t)
	const gib = 1 << 30
	for _, c := range []struct {
		mem  string
		size uint64
	}{{"64M", 64 << 20}, {"512M", 512 << 20}, {"3G", 3 * gib}, {"5G", 5 * gib}} {
		t.Run(c.mem, func(t *testing.T) {
			if c.size == 5*gib {
				if total, err := vmm.HostMemTotal(); err != nil || total < c.size {
					t.Skipf("host has %d MiB, 5G case needs more (%v)", total>>20, err)
				}
			}
			o := bootTest(t, "test=boot", "--mem", c.mem)
			// Independent statement of govm's documented layout (docs/boot.md).
			want := []string{"0:9fc00:1", "9fc00:400:2", "f0000:10000:2",
				fmt.Sprintf("100000:%x:1", min(c.size, 3*gib)-0x100000)}
			if c.size > 3*gib {
				want = append(want, fmt.Sprintf("100000000:%x:1", c.size-3*gib))
			}
			e := result(t, o, "e820")
			if got := e.KV["entries"]; got != strings.Join(want, ",") {
				t.Fatalf("e820 for --mem %s:\n got %s\nwant %s", c.mem, got, strings.Join(want, ","))
			}
			if n, _ := e.Int("count"); n != int64(len(want)) {
				t.Fatalf("e820 count %d, want %d", n, len(want))
			}
		})
	}
}

// TestBootInitrd checks the initrd arrives intact and well placed.
func TestBootInitrd(t *testing.T) {
	needKVM(t)
	data := make([]byte, 3<<20+123)
	rand.New(rand.NewSource(1)).Read(data)
	path := filepath.Join(t.TempDir(), "initrd")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	o := bootTest(t, "test=boot", "--initrd", path, "--mem", "128M")
	r := result(t, o, "initrd")
	if got, want := r.KV["crc32"], fmt.Sprintf("%08x", crc32.ChecksumIEEE(data)); got != want {
		t.Fatalf("initrd crc32 %s, want %s", got, want)
	}
	if size, _ := r.Int("size"); size != int64(len(data)) {
		t.Fatalf("initrd size %d, want %d", size, len(data))
	}
	addr, err := r.Int("addr")
	if err != nil || addr%4096 != 0 || addr < 0x100000 || addr+int64(len(data)) > 128<<20 {
		t.Fatalf("initrd at %#x (%v): want page-aligned inside RAM above 1 MiB", addr, err)
	}
}

// TestBootMPTableCPUs: --cpus is what the guest finds in the MP table.
func TestBootMPTableCPUs(t *testing.T) {
	needKVM(t)
	for _, n := range []int{1, 2} {
		o := bootTest(t, "test=mptable", "--cpus", fmt.Sprint(n))
		r := result(t, o, "mptable")
		if cpus, _ := r.Int("cpus"); cpus != int64(n) {
			t.Fatalf("--cpus %d: guest found %d CPUs in the MP table", n, cpus)
		}
		if io, _ := r.Int("ioapics"); io != 1 {
			t.Fatalf("guest found %d IOAPICs, want 1", io)
		}
	}
}

// TestBootCPL3Native: the test kernel's CPL3 loop runs natively, i.e. far
// faster than the same loop at CPL0, which this host's KVM emulates. On
// hardware-virtualization hosts both run natively and the ratio is ~1:
// the assertion then checks CPL3 is not slower.
func TestBootCPL3Native(t *testing.T) {
	needKVM(t)
	o := bootTest(t, "test=speed")
	ratio, err := result(t, o, "speed").Int("ratio")
	if err != nil {
		t.Fatal(err)
	}
	emu := hostEmulationOnly()
	t.Logf("CPL0/CPL3 cycles-per-iteration ratio %d (emulation-only host: %v)", ratio, emu)
	if emu && ratio <= 100 {
		t.Fatalf("CPL3 only %dx faster than CPL0: the user-mode loop is not running natively", ratio)
	}
	if !emu && ratio < 1 {
		t.Fatalf("CPL3 slower than CPL0 (ratio %d)", ratio)
	}
}

// TestBootInterrupts: timer (PIT via the in-kernel PIC) and serial (govm's
// UART through KVM_IRQ_LINE) interrupts reach the guest.
func TestBootInterrupts(t *testing.T) {
	needKVM(t)
	r := result(t, bootTest(t, "test=irq"), "irq")
	for _, k := range []string{"timer", "serial"} {
		if n, _ := r.Int(k); n <= 0 {
			t.Fatalf("%s interrupts: %d, want > 0 (%v)", k, n, r.KV)
		}
	}
	if n, _ := r.Int("spurious"); n != 0 {
		t.Fatalf("%d spurious interrupts", n)
	}
}

// TestBootExitStatus: the status the guest writes to the debug-exit port
// is govm's exit status, (v<<1)|1.
func TestBootExitStatus(t *testing.T) {
	needKVM(t)
	for _, v := range []int{0, 5, 100} {
		o := govm(t, 60*time.Second, "run", "--kernel", testKernel, "--no-default-params", "--debug-exit",
			"-p", fmt.Sprintf("test=boot exit=%d", v))
		if want := v<<1 | 1; o.ExitCode != want {
			t.Fatalf("guest exit=%d: govm status %d, want %d\n%s", v, o.ExitCode, want, o.Stderr)
		}
	}
}

// hostEmulationOnly is what govm itself decides (cpu.EmulationOnly).
func hostEmulationOnly() bool {
	emu, _ := cpu.EmulationOnly()
	return emu
}

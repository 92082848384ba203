package bench

import (
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/govm/govm/arch/x86/cpu"
)

// BenchmarkLinuxBoot: govm and QEMU boot the same minimal Linux (the
// default guest's kernel and initramfs) to a marker its /init prints,
// alternating, with the same kernel command line. Per VMM, the medians of:
// wall time to the first console byte, to "Run /init", to the marker; and
// the VMM's CPU time to the marker, all of it (the vCPU's emulation of the
// guest kernel included) and outside its vCPU threads. Ratios are
// govm/QEMU. Run with
//
//	go test -run '^$' -bench LinuxBoot -benchtime 3x ./bench/
//
// QEMU cannot step over the int3 and fwait that KVM's emulator lacks (govm
// carries them out), so on an emulation-only host both boot a variant built
// with guest/linux/bench/qemu-emulation.patch, which leaves them out
// (scripts/linux.sh builds it once into ../build/linux-qemu).
func BenchmarkLinuxBoot(b *testing.B) {
	kernel, initrd := linuxGuest(b)
	// The same command line for both: govm's defaults and, on an
	// emulation-only host, the parameters govm would add there.
	params := "console=ttyS0 earlyprintk=serial,ttyS0,115200 reboot=k panic=1 pci=conf1 acpi=off " +
		"i8042.direct=1 i8042.dumbkbd=1 i8042.nopnp=1 i8042.noaux=1"
	if emu, _ := cpu.EmulationOnly(); emu {
		params += " " + cpu.EmulatorParams
	}
	params += " govm.cmd=" + hex.EncodeToString([]byte("echo "+linuxMarker+"; reboot -f"))
	govm := govmArgv(b, kernel, params, "--initrd", initrd, "--no-default-params")
	qemu := qemuArgv(b, kernel, params, "-initrd", initrd, "-name", "govm-bench,debug-threads=on")
	timeout := benchTimeout(b, 120*time.Second)
	var gs, qs []linuxBootSample
	for i := 0; i < b.N; i++ {
		for _, v := range []struct {
			argv []string
			out  *[]linuxBootSample
		}{{govm, &gs}, {qemu, &qs}} {
			s, err := bootLinux(v.argv, timeout)
			if err != nil {
				b.Fatalf("boot %d of %s: %v", i, filepath.Base(v.argv[0]), err)
			}
			*v.out = append(*v.out, s)
		}
	}
	g, q := medianLinuxBoot(gs), medianLinuxBoot(qs)
	for _, p := range []struct {
		name string
		g, q time.Duration
	}{{"first-byte", g.firstByte, q.firstByte}, {"init", g.init, q.init}, {"marker", g.marker, q.marker},
		{"cpu", g.cpu, q.cpu}, {"cpu-outside-vcpu", g.rest, q.rest}} {
		b.ReportMetric(ms(p.g), "govm-"+p.name+"-ms")
		b.ReportMetric(ms(p.q), "qemu-"+p.name+"-ms")
		if p.q > 0 {
			b.ReportMetric(float64(p.g)/float64(p.q), "govm/qemu-"+p.name)
		}
	}
}

// linuxMarker is what the guest's /init prints once it runs commands.
const linuxMarker = "GOVM-BENCH-LINUX-READY"

type linuxBootSample struct {
	firstByte, init, marker time.Duration
	cpu, rest               time.Duration // the VMM's CPU time; outside its vCPU threads
}

// bootLinux boots argv until the marker, then ends it (govm and QEMU both
// exit on the reset that follows; a VMM still running is killed).
func bootLinux(argv []string, timeout time.Duration) (linuxBootSample, error) {
	v, err := Start(argv...)
	if err != nil {
		return linuxBootSample{}, err
	}
	defer v.Kill()
	if _, err := v.WaitLine(linuxMarker, timeout); err != nil {
		o := v.Output()
		return linuxBootSample{}, fmt.Errorf("%w\nserial tail: %q\nstderr: %s", err, tailString(o.Serial, 2000), o.Stderr)
	}
	c, err := ReadCPU(v.Cmd.Process.Pid)
	if err != nil {
		return linuxBootSample{}, err
	}
	var s linuxBootSample
	s.cpu, s.rest = c.Total, c.Rest()
	s.firstByte, _ = v.FirstByte(0)
	_, s.init, _ = v.LineAt("Run /init as init process")
	_, s.marker, _ = v.LineAt(linuxMarker)
	if s.init == 0 {
		return s, fmt.Errorf("no \"Run /init\" line before the marker")
	}
	_, _ = v.Wait(10 * time.Second)
	return s, nil
}

func medianLinuxBoot(ss []linuxBootSample) linuxBootSample {
	var fb, in, mk, c, r []time.Duration
	for _, s := range ss {
		fb, in, mk = append(fb, s.firstByte), append(in, s.init), append(mk, s.marker)
		c, r = append(c, s.cpu), append(r, s.rest)
	}
	return linuxBootSample{firstByte: Median(fb), init: Median(in), marker: Median(mk), cpu: Median(c), rest: Median(r)}
}

// linuxGuest returns the kernel and initramfs both VMMs boot: the default
// guest's, or on an emulation-only host its QEMU-comparable variant, built
// here when missing (cached: scripts/linux.sh).
func linuxGuest(b *testing.B) (kernel, initrd string) {
	initrd = locate(b, "GOVM_LINUX_INITRD", "../build/linux/initramfs.cpio", "default guest initramfs (make linux)")
	if emu, _ := cpu.EmulationOnly(); !emu {
		return locate(b, "GOVM_LINUX_KERNEL", "../build/linux/bzImage", "default guest kernel (make linux)"), initrd
	}
	out, err := filepath.Abs("../build/linux-qemu")
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("sh", "../scripts/linux.sh", out)
	cmd.Env = append(os.Environ(), "LINUX_PATCHES="+mustAbs(b, "../guest/linux/bench/qemu-emulation.patch"))
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building the QEMU-comparable kernel: %v\n%s", err, o)
	}
	return filepath.Join(out, "bzImage"), initrd
}

func mustAbs(b *testing.B, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

package bench

import (
	"encoding/hex"
	"fmt"
	"testing"
	"time"
)

// BenchmarkConsole: the default guest's Linux writes consoleBytes to its
// console, through the 8250 (govm --console serial, ttyS0: a port exit per
// byte) and through virtio-console (--console virtio, hvc0: a buffer per
// kick), alternating. Per console, the median bytes/s between two marker
// lines around the write, and govm's CPU time for the whole run; ratios
// are virtio/serial. Run with
//
//	go test -run '^$' -bench Console -benchtime 3x ./bench/
func BenchmarkConsole(b *testing.B) {
	kernel := locate(b, "GOVM_LINUX_KERNEL", "../build/linux/bzImage", "default guest kernel (make linux)")
	initrd := locate(b, "GOVM_LINUX_INITRD", "../build/linux/initramfs.cpio", "default guest initramfs (make linux)")
	cmd := fmt.Sprintf("echo CONS-START; head -c %d /dev/zero | tr '\\000' x; echo; echo CONS-END; reboot -f", consoleBytes)
	// govm's default command line (and, on an emulation-only host, the
	// parameters it adds there) with each console in turn.
	params := "govm.cmd=" + hex.EncodeToString([]byte(cmd))
	timeout := benchTimeout(b, 180*time.Second)
	rates := map[string][]float64{}
	cpus := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		for _, mode := range []string{"serial", "virtio"} {
			argv := govmArgv(b, kernel, params, "--initrd", initrd, "--console", mode)
			rate, cpuMS, err := consoleRun(argv, timeout)
			if err != nil {
				b.Fatalf("run %d, --console %s: %v", i, mode, err)
			}
			rates[mode] = append(rates[mode], rate)
			cpus[mode] = append(cpus[mode], cpuMS)
		}
	}
	for _, mode := range []string{"serial", "virtio"} {
		b.ReportMetric(Median(rates[mode]), mode+"-bytes/s")
		b.ReportMetric(Median(cpus[mode]), mode+"-govm-cpu-ms")
	}
	b.ReportMetric(Median(rates["virtio"])/Median(rates["serial"]), "virtio/serial-bytes/s")
}

// consoleBytes is what the guest writes: enough that the write, not the
// commands around it, decides the time through the 8250.
const consoleBytes = 32 << 10

// consoleRun boots argv and returns the console's bytes/s between the
// markers and govm's CPU time in ms.
func consoleRun(argv []string, timeout time.Duration) (float64, float64, error) {
	v, err := Start(argv...)
	if err != nil {
		return 0, 0, err
	}
	defer v.Kill()
	if _, err := v.WaitLine("CONS-END", timeout); err != nil {
		o := v.Output()
		return 0, 0, fmt.Errorf("%w\nserial tail: %q\nstderr: %s", err, tailString(o.Serial, 2000), o.Stderr)
	}
	_, start, ok1 := v.LineAt("CONS-START")
	_, end, ok2 := v.LineAt("CONS-END")
	if !ok1 || !ok2 || end <= start {
		return 0, 0, fmt.Errorf("markers at %v and %v", start, end)
	}
	c, err := ReadCPU(v.Cmd.Process.Pid)
	if err != nil {
		return 0, 0, err
	}
	_, _ = v.Wait(10 * time.Second)
	return float64(consoleBytes) / (end - start).Seconds(), ms(c.Total), nil
}

package bench

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkShare: the default guest's Linux writes and reads back a 16 MiB
// file on a --share (virtio-9p, 9p2000.L, msize 512 KiB) and the same bytes
// on a virtio-blk disk (O_DIRECT, so neither side reads its page cache),
// with markers between the steps; MB/s per step from the markers' host
// times, medians over the iterations. Run with
//
//	go test -run '^$' -bench Share -benchtime 3x ./bench/
func BenchmarkShare(b *testing.B) {
	kernel := locate(b, "GOVM_LINUX_KERNEL", "../build/linux/bzImage", "default guest kernel (make linux)")
	initrd := locate(b, "GOVM_LINUX_INITRD", "../build/linux/initramfs.cpio", "default guest initramfs (make linux)")
	const mb = 16
	script := strings.Join([]string{
		"mkdir -p /mnt/s && mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 s /mnt/s",
		"echo SH-0",
		fmt.Sprintf("dd if=/dev/zero of=/mnt/s/f bs=256k count=%d conv=fsync 2>/dev/null; echo SH-1", mb*4),
		fmt.Sprintf("dd if=/mnt/s/f of=/dev/null bs=256k count=%d 2>/dev/null; echo SH-2", mb*4),
		fmt.Sprintf("dd if=/dev/zero of=/dev/vda bs=256k count=%d oflag=direct 2>/dev/null; echo SH-3", mb*4),
		fmt.Sprintf("dd if=/dev/vda of=/dev/null bs=256k count=%d iflag=direct 2>/dev/null; echo SH-4", mb*4),
		"reboot -f",
	}, "\n")
	rates := map[string][]float64{}
	timeout := benchTimeout(b, 240*time.Second)
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		disk := filepath.Join(dir, "d.img")
		if err := os.WriteFile(disk, make([]byte, (mb+1)<<20), 0o644); err != nil {
			b.Fatal(err)
		}
		share := filepath.Join(dir, "share")
		if err := os.Mkdir(share, 0o755); err != nil {
			b.Fatal(err)
		}
		argv := govmArgv(b, kernel, "govm.cmd="+hex.EncodeToString([]byte(script)), "--initrd", initrd,
			"--share", share+",tag=s", "--disk", disk)
		v, err := Start(argv...)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := v.WaitLine("SH-4", timeout); err != nil {
			o := v.Output()
			v.Kill()
			b.Fatalf("%v\nserial tail: %q\nstderr: %s", err, tailString(o.Serial, 2000), o.Stderr)
		}
		var at [5]time.Duration
		for k := range at {
			_, at[k], _ = v.LineAt(fmt.Sprintf("SH-%d", k))
		}
		for k, name := range []string{"9p-write", "9p-read", "blk-write", "blk-read"} {
			rates[name] = append(rates[name], mb/(at[k+1]-at[k]).Seconds())
		}
		_, _ = v.Wait(10 * time.Second)
		v.Kill()
	}
	for _, name := range []string{"9p-write", "9p-read", "blk-write", "blk-read"} {
		b.ReportMetric(Median(rates[name]), name+"-MB/s")
	}
	b.ReportMetric(Median(rates["9p-read"])/Median(rates["blk-read"]), "9p/blk-read")
	b.ReportMetric(Median(rates["9p-write"])/Median(rates["blk-write"]), "9p/blk-write")
}

package serial

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/govm/govm/splat"
)

// bootLog is console text shaped like a Linux boot log: printk-stamped
// lines of ~60-100 bytes, with a WARNING splat and its trace among them.
func bootLog() []byte {
	var b strings.Builder
	for i := 0; b.Len() < 256<<10; i++ {
		switch i % 50 {
		case 17:
			fmt.Fprintf(&b, "[%5d.%06d] WARNING: CPU: 0 PID: 1 at drivers/base/core.c:123 device_add+0x1/0x2\n", i/100, i%100*10000)
		case 18:
			fmt.Fprintf(&b, "[%5d.%06d] Call Trace:\n", i/100, i%100*10000)
		default:
			fmt.Fprintf(&b, "[%5d.%06d] pci 0000:00:%02x.0: [1af4:1001] type 00 class 0x010000 conventional PCI endpoint\n", i/100, i%100*10000, i%32)
		}
	}
	return []byte(b.String())
}

// BenchmarkUARTOutput measures console bytes/s through the UART as the
// guest drives it (one THR write per byte), into a discarding stdout, with
// and without the splat watcher that govm run puts beside stdout. Run:
//
//	go test -run XXX -bench UARTOutput -benchtime 20x ./serial/
func BenchmarkUARTOutput(b *testing.B) {
	log := bootLog()
	for _, c := range []struct {
		name string
		out  func() io.Writer
	}{
		{"plain", func() io.Writer { return io.Discard }},
		{"watched", func() io.Writer {
			return io.MultiWriter(io.Discard, splat.New(splat.Config{ReadyMarker: "login:"}))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			u := New(&fakeLine{}, c.out())
			b.SetBytes(int64(len(log)))
			var reg [1]byte
			for b.Loop() {
				for _, ch := range log {
					reg[0] = ch
					u.Write(0, reg[:]) // THR
				}
			}
			u.Flush()
		})
	}
}

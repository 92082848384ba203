package vmm

import (
	"os"

	"github.com/govm/govm/hw/serial"
)

func startConsole(in *os.File, dst serial.Inputter, quit func()) (func(), error) {
	return serial.StartConsole(in, dst, quit)
}

func (m *Machine) flushConsole() {
	if m.uart != nil {
		m.uart.Flush()
		// Unblocks the console feeder goroutine stuck in Input.
		m.uart.Close()
	}
}

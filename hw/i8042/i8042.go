// Package i8042 emulates just enough of the PC keyboard controller (Intel
// 8042 / "PS/2 controller") for Linux's drivers/input/serio/i8042.c to
// probe it without stalling, and for a guest to reset the machine through
// it (command 0xFE, what Linux's reboot=k does).
//
// Design decisions:
//
//   - Keyboard present but silent. Linux's i8042 driver always creates the
//     keyboard port; govm passes i8042.dumbkbd (so atkbd never sends it a
//     command) together with i8042.noaux, i8042.nomux and i8042.nopnp, like
//     kvmtool. Pretending the keyboard is there costs nothing and matches
//     what Linux assumes with dumbkbd. Bytes written to the keyboard get
//     the answers a real keyboard gives (ACK, self-test pass, ID) in the
//     output buffer, so a guest that polls sees sane replies.
//   - No interrupt lines. With dumbkbd and noaux Linux never waits for
//     IRQ1/IRQ12; without noaux it spends its 250 ms AUX IRQ test and
//     decides there is no mouse, without dumbkbd atkbd times out and finds
//     no keyboard. Both are slow, neither is fatal.
//   - Status bits are exact from the first access: the driver's
//     i8042_wait_read/write poll up to 10000 x 50 us, and i8042_flush
//     treats a status of 0xff as "No controller found".
package i8042

import (
	"sync"

	"github.com/govm/govm/iobus"
)

// Port numbers and the offsets Controller.Read/Write use (port - DataPort),
// so a Controller also works registered at DataPort with length 5.
const (
	DataPort    = 0x60
	CommandPort = 0x64
	offData     = 0
	offCommand  = CommandPort - DataPort
)

// Status register bits.
const (
	stOBF     = 0x01 // output buffer full: data port has a byte for the host
	stIBF     = 0x02 // input buffer full: never, we consume writes at once
	stSys     = 0x04 // system flag, set after a passed self-test
	stCmd     = 0x08 // last write went to the command port
	stUnlock  = 0x10 // keyboard not inhibited (keylock)
	stAuxData = 0x20 // output buffer byte came from the aux (mouse) port
)

// Controller command byte (CTR) bits.
const (
	ctrKbdInt = 0x01
	ctrAuxInt = 0x02
	ctrSys    = 0x04
	ctrKbdDis = 0x10
	ctrAuxDis = 0x20
	ctrXlate  = 0x40
)

// Controller commands (written to the command port).
const (
	cmdReadCTR     = 0x20
	cmdWriteCTR    = 0x60
	cmdAuxDisable  = 0xa7
	cmdAuxEnable   = 0xa8
	cmdAuxTest     = 0xa9
	cmdSelfTest    = 0xaa
	cmdKbdTest     = 0xab
	cmdKbdDisable  = 0xad
	cmdKbdEnable   = 0xae
	cmdReadInput   = 0xc0
	cmdReadOutput  = 0xd0
	cmdWriteOutput = 0xd1
	cmdKbdLoop     = 0xd2
	cmdAuxLoop     = 0xd3
	cmdAuxSend     = 0xd4
	cmdPulseReset  = 0xfe
)

// outputPortReset is output port bit 0: the CPU reset line, active low.
// Bit 1 is the A20 gate.
const (
	outputPortReset = 0x01
	outputPortA20   = 0x02
)

// maxQueue bounds the output queue; a keyboard reply is at most 3 bytes.
const maxQueue = 16

// Controller is the 8042. It is safe for concurrent use.
type Controller struct {
	mu     sync.Mutex
	reset  func()
	ctr    byte
	status byte // stSys | stCmd | stUnlock; OBF/AUX derive from queue
	outp   byte // output port
	// pending is the command whose parameter byte the next data-port
	// write is, or 0.
	pending byte
	queue   []outByte
	// kbd is the keyboard command awaiting its argument, or 0.
	kbd byte
}

type outByte struct {
	v   byte
	aux bool
}

// New returns a controller whose reset line (command 0xFE, or a write of
// the output port with bit 0 clear) calls reset. reset runs on the vCPU
// thread that issued the command and must not block on that vCPU.
func New(reset func()) *Controller {
	return &Controller{
		reset:  reset,
		ctr:    ctrKbdInt | ctrSys | ctrXlate, // what a BIOS leaves behind
		status: stSys | stUnlock,
		outp:   outputPortReset | outputPortA20,
	}
}

// Data returns the device to register at DataPort (0x60), length 1.
func (c *Controller) Data() iobus.Device { return port{c, offData} }

// Command returns the device to register at CommandPort (0x64), length 1;
// reads are the status register.
func (c *Controller) Command() iobus.Device { return port{c, offCommand} }

// Register puts both ports on bus.
func (c *Controller) Register(bus *iobus.Bus) error {
	if err := bus.Register(DataPort, 1, c.Data()); err != nil {
		return err
	}
	return bus.Register(CommandPort, 1, c.Command())
}

// port is one of the two registrations: the bus gives off 0 for both, so
// each view adds its own offset.
type port struct {
	c   *Controller
	off uint16
}

func (p port) Read(off uint16, data []byte)  { p.c.Read(p.off+off, data) }
func (p port) Write(off uint16, data []byte) { p.c.Write(p.off+off, data) }

// Read implements iobus.Device with off = port - DataPort: 0 reads the
// output buffer, 4 the status register, anything else floats high. Only
// the first byte of a wider access is meaningful; the rest read 0xff.
func (c *Controller) Read(off uint16, data []byte) {
	if len(data) == 0 {
		return
	}
	for i := range data {
		data[i] = 0xff
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch off {
	case offData:
		data[0] = c.readData()
	case offCommand:
		data[0] = c.readStatus()
	}
}

// Write implements iobus.Device with off = port - DataPort. Only the first
// byte of an access is used: the 8042 has 8-bit ports.
func (c *Controller) Write(off uint16, data []byte) {
	if len(data) == 0 {
		return
	}
	c.mu.Lock()
	var doReset bool
	switch off {
	case offData:
		c.status &^= stCmd
		doReset = c.writeData(data[0])
	case offCommand:
		c.status |= stCmd
		doReset = c.command(data[0])
	}
	c.mu.Unlock()
	if doReset && c.reset != nil {
		c.reset() // outside the lock: it may tear the VM down
	}
}

func (c *Controller) readStatus() byte {
	s := c.status
	if len(c.queue) > 0 {
		s |= stOBF
		if c.queue[0].aux {
			s |= stAuxData
		}
	}
	return s
}

// readData pops the output buffer. Reading an empty buffer returns the
// last byte again on hardware; 0 is as good for a guest that did not
// check OBF.
func (c *Controller) readData() byte {
	if len(c.queue) == 0 {
		return 0
	}
	b := c.queue[0]
	c.queue = c.queue[1:]
	return b.v
}

func (c *Controller) push(v byte, aux bool) {
	if len(c.queue) >= maxQueue {
		return // the guest is not reading; a real 8042 would stall
	}
	c.queue = append(c.queue, outByte{v, aux})
}

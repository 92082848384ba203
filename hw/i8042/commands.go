package i8042

// command runs a controller command (a write to the command port). It
// reports whether the CPU reset line was pulsed.
func (c *Controller) command(cmd byte) (reset bool) {
	c.pending = 0
	switch {
	case cmd == cmdReadCTR:
		c.reply(c.ctr)
	case cmd > cmdReadCTR && cmd < cmdWriteCTR:
		c.reply(0) // controller RAM: nothing stored there
	case cmd >= cmdWriteCTR && cmd < 0x80:
		c.pending = cmd // parameter follows on the data port
	case cmd == cmdAuxDisable:
		c.ctr |= ctrAuxDis
	case cmd == cmdAuxEnable:
		c.ctr &^= ctrAuxDis
	case cmd == cmdAuxTest, cmd == cmdKbdTest:
		c.reply(0x00) // interface test: no clock or data line stuck
	case cmd == cmdSelfTest:
		c.status |= stSys
		c.reply(0x55) // self-test passed
	case cmd == cmdKbdDisable:
		c.ctr |= ctrKbdDis
	case cmd == cmdKbdEnable:
		c.ctr &^= ctrKbdDis
	case cmd == cmdReadInput:
		c.reply(0x80) // keyboard not inhibited
	case cmd == cmdReadOutput:
		c.reply(c.outp)
	case cmd == cmdWriteOutput, cmd == cmdKbdLoop, cmd == cmdAuxLoop, cmd == cmdAuxSend:
		c.pending = cmd
	case cmd >= 0xf0:
		// Pulse output port lines 0-3 for 6 us; a clear bit is pulsed.
		// Bit 0 is the CPU reset line: 0xFE is the classic reboot.
		return cmd&outputPortReset == 0
	}
	// Anything else (0xa1 version, 0xa4 password, vendor commands) is
	// ignored, as an 8042 without that feature would.
	return false
}

// reply places a controller response in the output buffer. A controller
// has a one-byte output buffer, so a response replaces what the guest did
// not read.
func (c *Controller) reply(v byte) {
	c.queue = append(c.queue[:0], outByte{v: v})
}

// writeData handles a data-port write: the parameter of a pending
// controller command, or a byte for the keyboard. It reports a reset.
func (c *Controller) writeData(v byte) (reset bool) {
	cmd := c.pending
	c.pending = 0
	switch {
	case cmd == cmdWriteCTR:
		c.ctr = v
		// The system flag in the status register mirrors CTR bit 2.
		c.status = c.status&^stSys | v&ctrSys
	case cmd > cmdWriteCTR && cmd < 0x80:
		// controller RAM write: not kept
	case cmd == cmdWriteOutput:
		c.outp = v
		return v&outputPortReset == 0
	case cmd == cmdKbdLoop:
		c.push(v, false) // as if the keyboard had sent v
	case cmd == cmdAuxLoop:
		c.push(v, true) // as if the mouse had sent v: Linux's AUX probe
	case cmd == cmdAuxSend:
		// No mouse: the byte goes nowhere.
	default:
		c.keyboard(v)
	}
	return false
}

// Keyboard replies (PS/2 keyboard protocol).
const (
	kbdAck      = 0xfa
	kbdResend   = 0xfe
	kbdTestPass = 0xaa
	kbdEcho     = 0xee
)

// keyboard answers a byte sent to the keyboard the way an idle MF2
// keyboard does. Nothing ever sends scancodes: the keyboard has no keys.
func (c *Controller) keyboard(v byte) {
	if arg := c.kbd; arg != 0 {
		c.kbd = 0
		c.push(kbdAck, false)
		if arg == 0xf0 && v == 0 { // "get scan code set"
			c.push(0x02, false)
		}
		return
	}
	switch v {
	case 0xff: // reset and self-test
		c.push(kbdAck, false)
		c.push(kbdTestPass, false)
	case 0xf2: // identify: MF2 keyboard
		c.push(kbdAck, false)
		c.push(0xab, false)
		c.push(0x83, false)
	case kbdEcho:
		c.push(kbdEcho, false)
	case 0xed, 0xf0, 0xf3: // LEDs, scan code set, typematic: argument follows
		c.kbd = v
		c.push(kbdAck, false)
	case 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb: // enable, disable, defaults, modes
		c.push(kbdAck, false)
	default:
		c.push(kbdResend, false)
	}
}

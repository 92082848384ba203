package serial

// EscapeChar starts a console escape sequence: Ctrl-A, as in QEMU's
// character multiplexer, so users need not learn another key.
const EscapeChar = 0x01

// escaper is the console's escape-sequence state machine, kept free of I/O
// so it can be tested byte by byte:
//
//	Ctrl-A x       quit govm
//	Ctrl-A Ctrl-A  send one literal Ctrl-A to the guest
//	Ctrl-A other   send both bytes (QEMU drops unknown escapes; we would
//	               rather not lose keystrokes)
//
// A Ctrl-A at the end of one read waits for the next read.
type escaper struct {
	afterEscape bool
}

// feed filters in, appending the bytes meant for the guest to dst. It
// reports quit when Ctrl-A x was seen; bytes after it are not forwarded.
func (e *escaper) feed(dst, in []byte) (out []byte, quit bool) {
	for _, b := range in {
		if !e.afterEscape {
			if b == EscapeChar {
				e.afterEscape = true
				continue
			}
			dst = append(dst, b)
			continue
		}
		e.afterEscape = false
		switch b {
		case 'x':
			return dst, true
		case EscapeChar:
			dst = append(dst, EscapeChar)
		default:
			dst = append(dst, EscapeChar, b)
		}
	}
	return dst, false
}

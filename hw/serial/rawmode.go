package serial

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// makeRaw puts the terminal fd in raw mode for input only, and returns how
// to undo it.
//
// Input is raw as in cfmakeraw(3) (no echo, no line editing, no signals,
// no CR/NL translation, 8 bits, one byte at a time), so every key reaches
// the guest. Output post-processing stays on, with ONLCR, as QEMU's stdio
// character device keeps it: the guest's bare "\n" and govm's own messages
// then start at the left margin instead of drawing a staircase.
// golang.org/x/term's MakeRaw clears OPOST, which is why it is not used.
func makeRaw(fd int) (restore func(), err error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("serial: console raw mode: %w", err)
	}
	t := *old
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag |= unix.OPOST | unix.ONLCR
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &t); err != nil {
		return nil, fmt.Errorf("serial: console raw mode: %w", err)
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}

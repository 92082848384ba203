package main

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// msgWriter writes govm's own messages to stderr, through errQ. On a
// terminal whose output post-processing is off (OPOST or ONLCR clear: a
// raw terminal), a bare "\n" would only move down a line, and each message
// would start where the previous one ended; there it writes "\r\n" itself.
type msgWriter struct {
	fd int
	w  io.Writer
}

func newMsgWriter() io.Writer { return msgWriter{int(os.Stderr.Fd()), errQ} }

func (w msgWriter) Write(p []byte) (int, error) {
	if !rawTTY(w.fd) {
		return w.w.Write(p)
	}
	q := bytes.ReplaceAll(bytes.ReplaceAll(p, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
	if _, err := w.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}

// rawTTY says whether fd is a terminal that does not turn "\n" into
// "\r\n". Checked at each message (they are few) because the console may
// switch the terminal to raw mode after govm started.
func rawTTY(fd int) bool {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return false // not a terminal
	}
	return t.Oflag&unix.OPOST == 0 || t.Oflag&unix.ONLCR == 0
}

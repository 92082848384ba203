package serial

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/term"
)

// consoleQueue is how many stdin reads may wait for the guest to drain its
// FIFO. While the queue has room the reader keeps reading, so Ctrl-A x
// still works when the guest is not reading its serial port; only after
// this many reads (up to consoleQueue*consoleChunk bytes, e.g. a huge
// paste) does stdin stop being read.
const (
	consoleQueue = 256
	consoleChunk = 4096
)

// Inputter is where StartConsole delivers the user's input: the UART, or
// another console device (virtio-console). Input blocks until every byte
// of b is queued and returns fewer only once the device is closed.
type Inputter interface {
	Input(b []byte) int
}

// StartConsole connects in (the user's stdin) to dst for `govm run`.
//
// When in is a terminal its input is switched to raw mode (output
// post-processing stays on, see makeRaw), so keys such as Ctrl-C
// reach the guest, and the escape sequences of escaper apply (Ctrl-A x
// calls quit). When in is not a terminal (a pipe or file) its bytes are
// passed through untouched and end of input simply stops the copy.
//
// No byte is dropped: a reader goroutine filters escapes and queues the
// data, a feeder goroutine hands it to dst.Input, which blocks until the
// guest makes room.
//
// The returned restore puts the terminal back as it was; it is idempotent
// and safe to call from a signal handler goroutine and at exit. It does not
// stop the reader goroutine (a blocking read on stdin cannot be cancelled);
// after restore the reader forwards nothing more.
func StartConsole(in *os.File, dst Inputter, quit func()) (restore func(), err error) {
	c := &console{dst: dst, quit: quit, in: in, queue: make(chan []byte, consoleQueue)}
	fd := int(in.Fd())
	if term.IsTerminal(fd) {
		restoreTerm, err := makeRaw(fd)
		if err != nil {
			return nil, err
		}
		c.escapes = true
		c.restoreTerm = restoreTerm
	}
	go c.feed()
	go c.read()
	return c.restore, nil
}

type console struct {
	dst     Inputter
	quit    func()
	in      io.Reader
	queue   chan []byte
	escapes bool

	once        sync.Once
	restoreTerm func()
	mu          sync.Mutex
	stopped     bool
}

func (c *console) restore() {
	c.once.Do(func() {
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
		if c.restoreTerm != nil {
			c.restoreTerm()
		}
	})
}

func (c *console) isStopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}

// read copies stdin into the queue through the escape filter.
func (c *console) read() {
	defer close(c.queue)
	var esc escaper
	buf := make([]byte, consoleChunk)
	for {
		n, err := c.in.Read(buf)
		if n > 0 && !c.isStopped() {
			data := append([]byte(nil), buf[:n]...)
			quit := false
			if c.escapes {
				data, quit = esc.feed(nil, buf[:n])
			}
			if len(data) > 0 {
				c.queue <- data
			}
			if quit {
				c.quit()
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !c.isStopped() {
				fmt.Fprintf(os.Stderr, "govm: console input: %v\r\n", err)
			}
			return
		}
		if c.isStopped() {
			return
		}
	}
}

// feed hands queued input to the device, blocking while it is full.
func (c *console) feed() {
	for data := range c.queue {
		if c.dst.Input(data) < len(data) {
			return // device closed: the VM is going away
		}
	}
}

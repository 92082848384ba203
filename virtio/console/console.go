// Package virtioconsole is the console device (virtio spec 5.3) with one
// port and no features: receiveq0 carries the host's input to the guest,
// transmitq0 the guest's output to the host. Linux's virtio_console binds
// it as hvc0. Each exit moves a buffer, where an 8250 moves a byte.
package virtioconsole

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/govm/govm/virtio"
	"golang.org/x/sys/unix"
)

// Queue indexes (spec 5.3.2, port 0 without VIRTIO_CONSOLE_F_MULTIPORT).
const (
	RXQueue   = 0 // receiveq0: host -> guest
	TXQueue   = 1 // transmitq0: guest -> host
	QueueSize = 128
)

// inputMax bounds the host input waiting for the guest's buffers: Input
// blocks beyond it (back-pressure, as the UART's FIFO gives).
const inputMax = 64 << 10

// Device is a virtio-console device writing the guest's output to out.
// The transport serialises Activate and Reset; Input may be called from
// any goroutine.
type Device struct {
	out io.Writer
	io  virtio.Worker

	mu     sync.Mutex
	space  *sync.Cond // signalled when input is taken or on Close
	input  []byte     // host input not yet given to the guest
	closed bool
	efd    int // eventfd: input arrived (the Loop waits on it)

	outBytes, inBytes uint64 // under mu
}

var _ virtio.Device = (*Device)(nil)

// New returns an inactive device writing the guest's output to out.
func New(out io.Writer) (*Device, error) {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("virtioconsole: eventfd: %w", err)
	}
	d := &Device{out: out, efd: efd}
	d.space = sync.NewCond(&d.mu)
	return d, nil
}

// Type is virtio.DeviceConsole.
func (d *Device) Type() virtio.DeviceType { return virtio.DeviceConsole }

// Features are the ring features only: no size, no multiport, no
// emergency write (spec 5.3.3).
func (d *Device) Features() uint64 { return virtio.RingFeatures }

// QueueMaxSizes is port 0's two queues.
func (d *Device) QueueMaxSizes() []uint16 { return []uint16{QueueSize, QueueSize} }

// ReadConfig: struct virtio_console_config's fields exist only with their
// features (spec 5.3.4), none offered: zeros.
func (d *Device) ReadConfig(off uint64, data []byte) { clear(data) }

// WriteConfig ignores writes (emerg_wr needs VIRTIO_CONSOLE_F_EMERG_WRITE).
func (d *Device) WriteConfig(off uint64, data []byte) {}

// Input queues host input (stdin) for the guest. It blocks while more
// than inputMax bytes wait for the guest's buffers, and returns len(b), or
// fewer only after Close: the same contract as the UART's.
func (d *Device) Input(b []byte) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for n < len(b) {
		for !d.closed && len(d.input) >= inputMax {
			d.space.Wait()
		}
		if d.closed {
			break
		}
		k := min(len(b)-n, inputMax-len(d.input))
		d.input = append(d.input, b[n:n+k]...)
		n += k
		d.notify()
	}
	return n
}

// notify wakes the Loop's RX source (an eventfd write never blocks here:
// the counter cannot reach its maximum).
func (d *Device) notify() {
	var one = [8]byte{1}
	unix.Write(d.efd, one[:])
}

// take moves up to len(dst) bytes of waiting input into dst.
func (d *Device) take(dst []byte) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := copy(dst, d.input)
	d.input = d.input[:copy(d.input, d.input[n:])]
	d.inBytes += uint64(n)
	d.space.Broadcast()
	return n
}

// pending reports whether input waits.
func (d *Device) pending() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.input) > 0
}

// Close ends blocked and future Input calls and releases the eventfd. Call
// it after Reset.
func (d *Device) Close() error {
	d.mu.Lock()
	d.closed = true
	d.space.Broadcast()
	d.mu.Unlock()
	return unix.Close(d.efd)
}

// Stats are the bytes the guest wrote and read.
type Stats struct {
	Out uint64 `json:"out_bytes"`
	In  uint64 `json:"in_bytes"`
}

// Stats returns the byte counts since New.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return Stats{Out: d.outBytes, In: d.inBytes}
}

var _ virtio.QueueReporter = (*Device)(nil)

// QueueName is "rx" for receiveq0 and "tx" for transmitq0.
func (d *Device) QueueName(i int) string {
	if i == RXQueue {
		return "rx"
	}
	return "tx"
}

// QueueTraffic is the bytes each way.
func (d *Device) QueueTraffic(i int) (uint64, map[string]uint64, bool) {
	s := d.Stats()
	if i == RXQueue {
		return s.In, nil, true
	}
	return s.Out, nil, true
}

// ErrQueues: Activate got fewer queues than port 0 has.
var ErrQueues = errors.New("virtioconsole: receiveq0 and transmitq0 not both configured")

// Activate starts the I/O goroutine: a virtio.Loop over RX (waiting on
// the input eventfd while no input waits) and TX.
func (d *Device) Activate(a virtio.Activation) error {
	if len(a.Queues) < 2 || len(a.Bells) < 2 || a.Mem == nil || a.Intr == nil {
		return ErrQueues
	}
	return d.io.Start(a.Bells[:2], func(stop <-chan struct{}) {
		srv := func(i int) virtio.Server {
			return virtio.Server{Mem: a.Mem, Queue: a.Queues[i], Bell: a.Bells[i], Intr: a.Intr, Stop: stop, Member: a.Member}
		}
		r := &rx{dev: d, srv: srv(RXQueue)}
		t := &tx{dev: d, srv: srv(TXQueue)}
		l := virtio.Loop{Stop: stop, Member: a.Member, Sources: []*virtio.Source{
			{Server: &r.srv, Turn: r.turn, Budget: QueueSize},
			{Server: &t.srv, Handle: t.handle, Budget: QueueSize},
		}}
		l.Run()
	})
}

// Reset stops the I/O goroutine and waits for it (spec 2.4). Input that
// waits stays for the next activation (a driver reloading).
func (d *Device) Reset() { d.io.Stop() }

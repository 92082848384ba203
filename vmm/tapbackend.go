package vmm

import (
	"errors"

	"github.com/govm/govm/tap"
	virtionet "github.com/govm/govm/virtio/net"
)

// tapBackend is a tap as virtio-net's Backend. The device owns its backend
// contract and knows nothing of taps; this says a tap's "no frame pending"
// in the device's words.
type tapBackend struct{ *tap.Tap }

var _ virtionet.Backend = tapBackend{}

func (b tapBackend) TryReadv(iovs [][]byte) (int, error) {
	n, err := b.Tap.TryReadv(iovs)
	if errors.Is(err, tap.ErrWouldBlock) {
		return n, virtionet.ErrWouldBlock
	}
	return n, err
}

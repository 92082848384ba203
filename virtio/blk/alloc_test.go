package virtioblk

import (
	"testing"

	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/virtiotest"
)

// TestReadRequestNoAlloc: serving a read request (Pop, header parse, the
// backend read straight into guest memory, status byte, AddUsed) allocates
// nothing in steady state, over both backend paths: plain ReadAt (memBackend)
// and vectored preadv (File). The request runs on the test goroutine, so
// the count sees only the per-request path.
func TestReadRequestNoAlloc(t *testing.T) {
	for _, disk := range testDisks(t, false) {
		t.Run(disk.name, func(t *testing.T) {
			dev, err := New(disk.be, Config{})
			if err != nil {
				t.Fatal(err)
			}
			d := virtiotest.New(t, 1<<20, QueueSize)
			features := virtio.Bit(virtio.FeatureRingEventIdx) | virtio.Bit(virtio.FeatureRingIndirectDesc)
			a := virtiotest.Activation(virtiotest.NewRecordingInterrupt(), features, d)
			// The recording interrupt allocates per signal; the
			// device's decision (after every request with
			// EVENT_IDX) does not. used_event far ahead: no signal.
			d.SetUsedEvent(0x8000)
			w := &worker{dev: dev, mem: a.Mem, srv: virtio.Server{Mem: a.Mem, Queue: a.Queues[0],
				Bell: a.Bells[0], Intr: a.Intr, Batch: decisionBatch(a.Features)}}
			heads := []uint16{
				d.BuildChain([][]byte{header(TypeIn, 3)}, []int{1024, 3072, 1}),
				d.BuildIndirectChain([][]byte{header(TypeIn, 9)}, []int{512, 1}),
			}
			serve := func() {
				d.PublishAvail(heads...)
				for range heads {
					c, err := d.Queue.Pop(d.Mem)
					if err != nil || c == nil {
						t.Fatalf("Pop = %v, %v", c, err)
					}
					n, err := w.handle(c)
					if err != nil {
						t.Fatal(err)
					}
					if err := w.srv.Used(c.Head, n); err != nil {
						t.Fatal(err)
					}
				}
			}
			serve()
			if u := d.Collect(); len(u) != 2 || u[0].Len != 4097 || u[1].Len != 513 ||
				u[0].In[0][0] != 3 || u[1].In[0][0] != 9 || u[0].In[2][0] != StatusOK {
				t.Fatalf("requests not served: %+v", u)
			}
			if allocs := testing.AllocsPerRun(200, serve); allocs != 0 {
				t.Fatalf("%v allocations per 2 read requests, want 0", allocs)
			}
		})
	}
}

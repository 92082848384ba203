package vmm

import "testing"

// TestProcsFor: one P per CPU and one per thread that blocks in a system
// call (vCPUs, virtio queues), never below the current value, and the
// user's GOMAXPROCS wins.
func TestProcsFor(t *testing.T) {
	for _, tc := range []struct {
		env                       string
		numCPU, current, blocking int
		want                      int
	}{
		{"", 2, 2, 3, 5}, // 1 vCPU + virtio-net RX and TX on 2 CPUs
		{"", 2, 2, 0, 2},
		{"", 2, 16, 3, 16}, // already more
		{"3", 2, 3, 3, 3},  // the user's choice
	} {
		if got := procsFor(tc.env, tc.numCPU, tc.current, tc.blocking); got != tc.want {
			t.Errorf("procsFor(%q, cpus %d, current %d, blocking %d) = %d, want %d",
				tc.env, tc.numCPU, tc.current, tc.blocking, got, tc.want)
		}
	}
}

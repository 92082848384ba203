// Package bench compares govm with QEMU on identical guests (README.md says how to
// run it and what each figure means): boot latency and host memory of the test
// kernel (BenchmarkBoot, BenchmarkBootCompare); boot time and CPU of a minimal
// Linux (BenchmarkLinuxBoot); virtio-blk throughput of the test kernel's
// blk-bench, against a host pread loop over the same image (BenchmarkBlk);
// virtio-net packet rates, ping -f round trips and host CPU per frame (vCPU
// threads and the rest, cpu.go), against the null VMM, a tap reader/writer with
// no device model and no guest (BenchmarkNet, nullvmm_test.go), and with a guest
// driver that polls its rings (BenchmarkNetPoll); and a long ping -f while the
// guest floods UDP (TestNetSoak, only with GOVM_NET_SOAK=1).
//
// Running a VMM and parsing the test kernel's "RESULT name pass|fail|skip k=v..."
// protocol live in internal/guestrun, shared with the end-to-end tests; this file
// adds what only measurements need: the VMM's memory sampled at its first serial
// byte, and medians.
package bench

import (
	"slices"
	"sync"

	"github.com/govm/govm/internal/guestrun"
)

// VMM is a running VMM (a guestrun.Proc) whose mappings were sampled the moment
// its first serial byte arrived.
type VMM struct {
	*guestrun.Proc

	mu       sync.Mutex
	firstMem []Mapping // nil until sampled, or if the process was already gone
}

// Start runs argv with its console on a pipe, like guestrun.Start, and reads
// /proc/PID/smaps as soon as the guest's first byte arrives.
func Start(argv ...string) (*VMM, error) {
	v := &VMM{}
	p, err := guestrun.Start(guestrun.Options{OnFirstByte: func(pid int) {
		maps, _ := ReadSmaps(pid) // an error means the VMM already exited: no sample
		v.mu.Lock()
		v.firstMem = maps
		v.mu.Unlock()
	}}, argv...)
	if err != nil {
		return nil, err
	}
	v.Proc = p
	return v, nil
}

// FirstByteMem returns the VMM's mappings sampled when the first serial byte
// arrived (nil if the process was already gone). Pass them to SplitRSS.
func (v *VMM) FirstByteMem() []Mapping {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.firstMem
}

// Median returns the median of xs (the mean of the middle two for an even count);
// zero for none. The median, not the mean, because on a shared 2-core host one
// descheduled run would otherwise dominate.
func Median[T ~int64 | ~float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// Spread is how far apart xs lie, (max - min) / median: 0 for figures that
// held still, 1 for a range as wide as the median itself. Reported beside a
// median so that a figure that swung is seen to have swung; zero for fewer
// than two values or a zero median.
func Spread(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := Median(xs)
	if m == 0 {
		return 0
	}
	return (slices.Max(xs) - slices.Min(xs)) / m
}

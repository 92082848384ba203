package bench

// Running both VMMs in turns and reporting their figures side by side, as
// ratios: shared by the network benchmarks (net_test.go, netpoll_test.go).

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// alternate runs govm and QEMU with cmdline, each in a namespace of its own, b.N
// times each, the order flipping every iteration so both see the same host load;
// then, unless nil, each(i) at the end of iteration i.
func alternate(b *testing.B, cmdline string, run func(*testing.B, string, []string) (sample, error), each func(i int)) (gs, qs []sample) {
	for i := 0; i < b.N; i++ {
		runs := []struct {
			name string
			argv func(ns string) []string
			out  *[]sample
		}{
			{"govm", func(ns string) []string { return govmNetArgv(b, ns, cmdline) }, &gs},
			{"qemu", func(ns string) []string { return qemuNetArgv(b, ns, cmdline) }, &qs},
		}
		if i%2 == 1 {
			runs[0], runs[1] = runs[1], runs[0]
		}
		for _, r := range runs {
			ns := benchNetns(b)
			s, err := run(b, ns, r.argv(ns))
			if err != nil {
				b.Fatalf("run %d of %s: %v", i, r.name, err)
			}
			*r.out = append(*r.out, s)
			b.Logf("run %d %s: %s", i, r.name, s)
		}
		if each != nil {
			each(i)
		}
	}
	return gs, qs
}

// String lists a sample's figures in a stable order, for -v logs.
func (s sample) String() string {
	var parts []string
	for _, k := range sortedMetricKeys([]sample{s}) {
		parts = append(parts, fmt.Sprintf("%s=%.4g", k, s[k]))
	}
	return strings.Join(parts, " ")
}

// sortedMetricKeys is every key of ss, sorted.
func sortedMetricKeys(ss []sample) []string {
	seen := map[string]bool{}
	var keys []string
	for _, s := range ss {
		for k := range s {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// ratioMetric says which figures get a govm/QEMU ratio: rates, the RTT and the
// CPU per 1000 frames (vCPU plus the rest, as PHASE-cpu-us/1k).
func ratioMetric(key string) bool {
	return strings.HasSuffix(key, "-pps") || strings.HasSuffix(key, "-rtt-ms") || strings.HasSuffix(key, "-cpu-us/1k")
}

// reportPairs publishes pairMetrics.
func reportPairs(b *testing.B, gs, qs []sample) {
	m := pairMetrics("govm", gs, "qemu", qs)
	for _, k := range sortedMetricKeys([]sample{m}) {
		b.ReportMetric(m[k], k)
	}
}

// pairMetrics is A-KEY and B-KEY medians for every figure (over the runs that
// have it: a figure never measured is left out, not zero), plus
// PHASE-cpu-us/1k (vCPU plus the rest), and for rates, RTT and CPU the median
// over iterations of A's figure divided by B's in the same iteration
// (A/B-KEY): the two runs are back to back, so a ratio of pairs follows the
// host's changing load better than a ratio of medians. With two pairs or
// more, A/B-KEY-spread is those ratios' Spread. Above 1 means A is
// faster for a rate, slower for RTT and CPU. A and B are govm and qemu, or a
// VMM and a null VMM.
func pairMetrics(a string, gs []sample, b string, qs []sample) map[string]float64 {
	m := map[string]float64{}
	for _, ss := range [][]sample{gs, qs} {
		for _, s := range ss {
			for k, v := range s {
				phase, ok := strings.CutSuffix(k, "-vcpu-us/1k")
				if rest, ok2 := s[phase+"-vmm-us/1k"]; ok && ok2 {
					s[phase+"-cpu-us/1k"] = v + rest
				}
			}
		}
	}
	for _, k := range sortedMetricKeys(append(slices.Clone(gs), qs...)) {
		for _, v := range []struct {
			prefix string
			ss     []sample
		}{{a + "-", gs}, {b + "-", qs}} {
			var xs []float64
			for _, s := range v.ss {
				if x, ok := s[k]; ok {
					xs = append(xs, x)
				}
			}
			if len(xs) > 0 {
				m[v.prefix+k] = Median(xs)
			}
		}
		if !ratioMetric(k) {
			continue
		}
		var rs []float64
		for j := range min(len(gs), len(qs)) {
			g, ok1 := gs[j][k]
			q, ok2 := qs[j][k]
			if ok1 && ok2 && q > 0 {
				rs = append(rs, g/q)
			}
		}
		if len(rs) > 0 {
			m[a+"/"+b+"-"+k] = Median(rs)
		}
		if len(rs) > 1 {
			m[a+"/"+b+"-"+k+"-spread"] = Spread(rs)
		}
	}
	return m
}

// TestPairMetrics: medians per VMM, CPU totals, ratios of pairs only for rates,
// RTT and CPU, and a figure missing from a run is left out rather than zero.
func TestPairMetrics(t *testing.T) {
	gs := []sample{
		{"tx-64-pps": 100, "tx-64-kicks/1k": 30, "tx-64-vcpu-us/1k": 10, "tx-64-vmm-us/1k": 20},
		{"tx-64-pps": 300, "tx-64-kicks/1k": 10, "tx-64-vcpu-us/1k": 30, "tx-64-vmm-us/1k": 40},
		{"tx-64-pps": 200, "tx-64-kicks/1k": 20},
	}
	qs := []sample{
		{"tx-64-pps": 100, "tx-64-kicks/1k": 1, "tx-64-vcpu-us/1k": 10, "tx-64-vmm-us/1k": 10},
		{"tx-64-pps": 100, "tx-64-kicks/1k": 1, "tx-64-vcpu-us/1k": 10, "tx-64-vmm-us/1k": 10},
		{"tx-64-pps": 400, "tx-64-kicks/1k": 1, "tx-64-vcpu-us/1k": 10, "tx-64-vmm-us/1k": 10},
	}
	m := pairMetrics("govm", gs, "qemu", qs)
	want := map[string]float64{
		"govm-tx-64-pps": 200, "qemu-tx-64-pps": 100, "govm/qemu-tx-64-pps": 1, // 1, 3, 0.5
		"govm-tx-64-kicks/1k": 20, "qemu-tx-64-kicks/1k": 1,
		"govm-tx-64-vcpu-us/1k": 20, "govm-tx-64-vmm-us/1k": 30, "govm-tx-64-cpu-us/1k": 50,
		"qemu-tx-64-vcpu-us/1k": 10, "qemu-tx-64-vmm-us/1k": 10, "qemu-tx-64-cpu-us/1k": 20,
		"govm/qemu-tx-64-cpu-us/1k":        2.5, // 30/20, 70/20; the third govm run has no CPU figure
		"govm/qemu-tx-64-pps-spread":       2.5, // (3 - 0.5) / 1
		"govm/qemu-tx-64-cpu-us/1k-spread": 0.8, // (3.5 - 1.5) / 2.5
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if len(m) != len(want) {
		t.Errorf("metrics %v, want exactly %v", m, want)
	}
}

package api

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/VictoriaMetrics/metrics"
)

// Prometheus text format through VictoriaMetrics/metrics, chosen over
// prometheus/client_golang by measurement (docs/api.md): +0.5 MB of binary
// instead of +4.2 MB, and ~0.1 ms of package init instead of ~1 ms on every
// govm start, including `govm version`.
func init() { metrics.ExposeMetadata(true) }

// WriteMetrics writes s in the Prometheus text exposition format. A fresh
// Set per scrape: the counters live in the VM, this only formats them.
func WriteMetrics(w io.Writer, s Stats) {
	set := metrics.NewSet()
	c := func(name string, v uint64) { set.GetOrCreateCounter(name).Set(v) }
	g := func(name string, v float64) { set.GetOrCreateGauge(name, nil).Set(v) }
	for _, q := range s.Queues {
		l := fmt.Sprintf(`{vm=%q,device=%q,queue="%d",name=%q}`, s.Name, q.Device, q.Queue, q.Name)
		c("govm_queue_kicks_total"+withLabel(l, "via", "port"), q.KicksPort)
		c("govm_queue_kicks_total"+withLabel(l, "via", "ioeventfd"), q.KicksEventFD)
		c("govm_queue_kicks_suppressed_total"+l, q.KicksSuppressed)
		c("govm_queue_polled_total"+l, q.Polled)
		c("govm_queue_interrupts_total"+l, q.Interrupts)
		c("govm_queue_interrupts_suppressed_total"+withLabel(l, "reason", "isr_set"), q.SuppressedISR)
		c("govm_queue_interrupts_suppressed_total"+withLabel(l, "reason", "no_interrupt"), q.SuppressedNoIntr)
		c("govm_queue_interrupts_suppressed_total"+withLabel(l, "reason", "event_idx"), q.SuppressedEventIdx)
		c("govm_queue_chains_total"+l, q.Chains)
		c("govm_queue_bytes_total"+l, q.Bytes)
		g("govm_queue_in_flight"+l, float64(q.InFlight))
		for _, r := range slices.Sorted(maps.Keys(q.Drops)) {
			c("govm_queue_drops_total"+withLabel(l, "reason", r), q.Drops[r])
		}
		for _, e := range q.Watchdog {
			c("govm_watchdog_detections_total"+withLabel(l, "kind", e.Kind), e.Count)
		}
	}
	for _, d := range s.Devices {
		l := fmt.Sprintf(`{vm=%q,device=%q}`, s.Name, d.Device)
		c("govm_device_isr_reads_total"+l, d.ISRReads)
		c("govm_device_guest_errors_total"+l, d.GuestErrors)
	}
	for _, v := range s.VCPUs {
		for _, r := range slices.Sorted(maps.Keys(v.Exits)) {
			c(fmt.Sprintf(`govm_vcpu_exits_total{vm=%q,vcpu="%d",reason=%q}`, s.Name, v.ID, r), v.Exits[r])
		}
	}
	set.WritePrometheus(w)
}

// withLabel adds name="value" to a label set "{...}".
func withLabel(l, name, value string) string {
	return fmt.Sprintf("%s,%s=%q}", l[:len(l)-1], name, value)
}

package api

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

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
		l := fmt.Sprintf(`{vm=%s,device=%s,queue="%d",name=%s}`, label(s.Name), label(q.Device), q.Index, label(q.Name))
		c("govm_queue_kicks_total"+withLabel(l, "via", "port"), q.KicksPort)
		c("govm_queue_kicks_total"+withLabel(l, "via", "ioeventfd"), q.KicksEventFD)
		c("govm_queue_kicks_suppressed_total"+l, q.KicksSuppressed)
		c("govm_queue_polled_total"+l, q.Polled)
		c("govm_queue_interrupts_total"+l, q.Interrupts)
		c("govm_queue_interrupts_suppressed_total"+withLabel(l, "reason", "isr_set"), q.SuppressedISRSet)
		c("govm_queue_interrupts_suppressed_total"+withLabel(l, "reason", "no_interrupt"), q.SuppressedNoInterrupt)
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
		l := fmt.Sprintf(`{vm=%s,device=%s}`, label(s.Name), label(d.Device))
		c("govm_device_isr_reads_total"+l, d.ISRReads)
		c("govm_device_guest_errors_total"+l, d.GuestErrors)
	}
	for _, v := range s.VCPUs {
		for _, r := range slices.Sorted(maps.Keys(v.Exits)) {
			c(fmt.Sprintf(`govm_vcpu_exits_total{vm=%s,vcpu="%d",reason=%s}`, label(s.Name), v.ID, label(r)), v.Exits[r])
		}
	}
	set.WritePrometheus(w)
}

// withLabel adds name="value" to a label set "{...}".
func withLabel(l, name, value string) string {
	return fmt.Sprintf("%s,%s=%s}", l[:len(l)-1], name, label(value))
}

// labelEscaper escapes a label value as the Prometheus text format
// requires: backslash, double quote and line feed, nothing else (Go's %q
// would write \x01 or \u00e9, which the format does not have).
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// label quotes a label value (a VM name, a device's path) for the text
// format: valid UTF-8, with invalid bytes as U+FFFD.
func label(v string) string {
	return `"` + labelEscaper.Replace(strings.ToValidUTF8(v, "\uFFFD")) + `"`
}

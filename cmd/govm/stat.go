package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/govm/govm/api"
)

func newStatCmd() *cobra.Command {
	var (
		asJSON, watch bool
		count         int
	)
	cmd := &cobra.Command{
		Use:   "stat NAME [--watch] [--json]",
		Short: "Show a running VM's queue and vCPU counters",
		Long: `stat prints one row per virtqueue (kicks by port and by ioeventfd,
interrupts raised and suppressed by reason, kicks the device suppressed,
chains, bytes, in flight, drops, watchdog detections) and one row per vCPU
with its exits by reason. NAME is a VM name or an API socket path.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client(args[0])
			if err != nil {
				return controlError(args[0], err)
			}
			defer c.Close()
			w := cmd.OutOrStdout()
			if !watch {
				count = 1
			}
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sig)
			var prev *api.Stats
			for n := 0; count <= 0 || n < count; n++ {
				if n > 0 {
					select {
					case <-sig:
						return nil
					case <-time.After(time.Second):
					}
				}
				s, err := c.Stats()
				if err != nil {
					if prev != nil && errors.Is(err, api.ErrNoVM) {
						fmt.Fprintf(w, "%s: the VM ended\n", args[0])
						return nil
					}
					return controlError(args[0], err)
				}
				if asJSON {
					if err := writeJSON(w, s); err != nil {
						return err
					}
				} else {
					if watch {
						fmt.Fprintf(w, "--- %s %s\n", s.Name, s.Time.Format(time.TimeOnly))
					}
					printStatTable(w, s, prev)
				}
				prev = &s
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&asJSON, "json", false, "print the API's /v1/stats JSON")
	fl.BoolVarP(&watch, "watch", "w", false, "refresh every second, with per-second rates (Ctrl-C ends)")
	fl.IntVar(&count, "count", 0, "with --watch: stop after this many refreshes (0: until Ctrl-C or the VM ends)")
	return cmd
}

// printStatTable writes the queue table and the vCPU table. With prev, the
// kick, interrupt, chain and byte columns are rates per second.
func printStatTable(w io.Writer, s api.Stats, prev *api.Stats) {
	dt := 0.0
	if prev != nil {
		dt = s.Time.Sub(prev.Time).Seconds()
	}
	rate := func(cur, old uint64) string {
		if dt <= 0 {
			return fmt.Sprint(cur)
		}
		return fmt.Sprintf("%.0f/s", float64(cur-old)/dt)
	}
	fmt.Fprintf(w, "%-24s %-3s %-8s %10s %10s %10s %21s %8s %10s %12s %7s %-22s %s\n",
		"DEVICE", "Q", "NAME", "KICKS", "(EVENTFD)", "IRQS", "SUPPR ISR/NOINT/EVIDX", "KSUPPR",
		"CHAINS", "BYTES", "INFLT", "DROPS", "WATCHDOG")
	for i, q := range s.Queues {
		var o api.QueueStats
		if prev != nil && i < len(prev.Queues) {
			o = prev.Queues[i]
		}
		fmt.Fprintf(w, "%-24s %-3d %-8s %10s %10s %10s %21s %8d %10s %12s %7d %-22s %s\n",
			trunc(q.Device, 24), q.Index, q.Name,
			rate(q.KicksPort+q.KicksEventFD, o.KicksPort+o.KicksEventFD), rate(q.KicksEventFD, o.KicksEventFD),
			rate(q.Interrupts, o.Interrupts),
			fmt.Sprintf("%d/%d/%d", q.SuppressedISRSet, q.SuppressedNoInterrupt, q.SuppressedEventIdx),
			q.KicksSuppressed, rate(q.Chains, o.Chains), rate(q.Bytes, o.Bytes), q.InFlight,
			drops(q.Drops), watchdogCol(q.Watchdog))
	}
	if len(s.VCPUs) == 0 {
		return
	}
	var reasons []string
	for r := range s.VCPUs[0].Exits {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	fmt.Fprintf(w, "\n%-5s", "VCPU")
	for _, r := range reasons {
		fmt.Fprintf(w, " %14s", r)
	}
	fmt.Fprintln(w)
	for i, v := range s.VCPUs {
		fmt.Fprintf(w, "%-5d", v.ID)
		for _, r := range reasons {
			var old uint64
			if prev != nil && i < len(prev.VCPUs) {
				old = prev.VCPUs[i].Exits[r]
			}
			fmt.Fprintf(w, " %14s", rate(v.Exits[r], old))
		}
		fmt.Fprintln(w)
	}
}

func drops(m map[string]uint64) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ",")
}

func watchdogCol(evs []api.WatchdogEvent) string {
	if len(evs) == 0 {
		return "-"
	}
	var parts []string
	for _, e := range evs {
		parts = append(parts, fmt.Sprintf("%s=%d", e.Kind, e.Count))
	}
	return strings.Join(parts, ",")
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

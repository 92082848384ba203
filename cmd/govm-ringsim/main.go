// Command govm-ringsim is `govm ringsim`: govm runs it from beside its own
// executable. It is a program of its own because the plotting library
// parses its fonts when it is initialised, which would add megabytes to
// the memory of every govm process, VMs included.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/govm/govm/virtio/ringsim"
)

func main() {
	if err := newRingsimCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "govm ringsim:", err)
		os.Exit(1)
	}
}

func newRingsimCmd() *cobra.Command {
	var (
		line   uint64
		asJSON bool
		svg    string
	)
	cmd := &cobra.Command{
		Use:   "govm ringsim [--line 64|128] [--json] [--svg FILE]",
		Short: "Count the cache lines a virtqueue moves between driver and device",
		Long: `ringsim runs govm's queue code (the device side) against a driver that
makes Linux's virtio_ring.c accesses, on guest memory instrumented at cache
lines, and prints the lines each side moves to the other per buffer, for the
split and packed rings across ring fullness, batch, chain length, indirect
tables, EVENT_IDX, completion order and descriptor reuse. docs/ringsim.md
explains the model. --svg also draws transfers per buffer against ring
fullness.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if line != 64 && line != 128 {
				return fmt.Errorf("--line %d: the simulator models 64- or 128-byte cache lines; pass --line 64 or --line 128", line)
			}
			curves, err := ringsim.Curves(line)
			if err != nil {
				return err
			}
			rows, err := ringsim.RunAll(ringsim.Scenarios(line))
			if err != nil {
				return err
			}
			var all []ringsim.Result
			for _, c := range curves {
				all = append(all, c.Points...)
			}
			all = append(all, rows...)
			if svg != "" {
				f, err := os.Create(svg)
				if err != nil {
					return fmt.Errorf("--svg: %w", err)
				}
				if err := ringsim.WriteSVG(f, curves, line); err != nil {
					f.Close()
					return fmt.Errorf("--svg %s: %w", svg, err)
				}
				if err := f.Close(); err != nil {
					return fmt.Errorf("--svg %s: %w", svg, err)
				}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return ringsim.WriteJSON(w, all)
			}
			return ringsim.WriteTable(w, all)
		},
	}
	cmd.Flags().Uint64Var(&line, "line", 64, "cache line size in bytes: 64 or 128")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON, with transfers split by ring field")
	cmd.Flags().StringVar(&svg, "svg", "", "also draw transfers per buffer against ring fullness into `FILE`")
	return cmd
}

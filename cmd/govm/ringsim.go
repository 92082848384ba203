package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// ringsimBinary is the program behind `govm ringsim` (cmd/govm-ringsim).
const ringsimBinary = "govm-ringsim"

func newRingsimCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ringsim [--line 64|128] [--json] [--svg FILE]",
		Short: "Count the cache lines a virtqueue moves between driver and device",
		Long: `ringsim runs govm's queue code against a driver that makes Linux's
virtio_ring.c accesses, on memory instrumented at cache lines, and prints the
lines each side moves per buffer for the split and packed rings
(docs/ringsim.md). It is the program govm-ringsim, found beside govm or in
$PATH; govm-ringsim --help lists its flags.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := findRingsim()
			if err != nil {
				return err
			}
			// Replace govm: the simulator's output and exit status are
			// the command's.
			return syscall.Exec(path, append([]string{path}, args...), os.Environ())
		},
	}
}

// findRingsim looks beside the running govm first, then in $PATH.
func findRingsim() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), ringsimBinary)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(ringsimBinary)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("ringsim: %s is not beside govm nor in $PATH: build it with `make build` (or go build -o bin/%s ./cmd/%s)",
				ringsimBinary, ringsimBinary, ringsimBinary)
		}
		return "", fmt.Errorf("ringsim: %w", err)
	}
	return p, nil
}

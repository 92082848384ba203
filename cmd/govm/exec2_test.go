package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"time"
)

// runWithStdout runs govm with stdout on f and stdin from /dev/null.
func runWithStdout(f *os.File, args ...string) (smokeOut, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, govmBin, args...)
	var e bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, &e
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); ok {
		err = nil
	}
	return smokeOut{stderr: e.String(), status: cmd.ProcessState.ExitCode()}, err
}

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"time"
)

type procOut struct {
	stdout, stderr string
	ExitCode       int
}

// runEnv runs argv with extra environment variables and a timeout.
func runEnv(env []string, timeout time.Duration, argv ...string) (*procOut, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); ok {
		err = nil
	}
	return &procOut{stdout: o.String(), stderr: e.String(), ExitCode: cmd.ProcessState.ExitCode()}, err
}

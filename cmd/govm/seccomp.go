package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/govm/govm/sandbox"
)

// seccompDefault is --seccomp's default: on, unless GOVM_SECCOMP says
// otherwise (contributors set GOVM_SECCOMP=audit to run a whole test suite
// with the filter in log-and-allow mode).
func seccompDefault() string {
	if v := os.Getenv("GOVM_SECCOMP"); v != "" {
		return v
	}
	return "on"
}

// startSandbox loads the seccomp filter, just before the vCPUs run: all
// set-up (files, taps, RAM, the kernel) is done, so the filter only needs
// what the run loop and the exit need (sandbox/allow.go).
func startSandbox(mode sandbox.Mode) error {
	if err := sandbox.Install(mode); err != nil {
		return err
	}
	// Hidden test hook: make one system call that is not on the list, so
	// a test can see the filter refuse it (on) or log and allow it
	// (audit). getpriority(2) is harmless and nothing in govm calls it.
	if os.Getenv("GOVM_TEST_SECCOMP_PROBE") != "" {
		prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
		fmt.Fprintf(newMsgWriter(), "govm: seccomp probe: getpriority = %d, %v\n", prio, err)
	}
	return nil
}

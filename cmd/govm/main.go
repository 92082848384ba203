// Command govm is a lightweight KVM hypervisor: it boots a Linux kernel with
// a serial console and legacy virtio-PCI block and network devices.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitError carries govm's exit status out of a command.
type exitError struct{ status int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.status) }

func main() {
	// A closed stdout pipe must not kill govm mid-guest: the UART records
	// the write error and the guest runs on.
	signal.Ignore(syscall.SIGPIPE)
	os.Exit(run(os.Args[1:]))
}

// run executes the CLI and returns the process exit status. Errors are
// printed as one line: "govm: <what>" (the error text says how to fix it).
func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.status
	default:
		fmt.Fprintf(os.Stderr, "govm: %s\n", oneLine(err.Error()))
		return 2
	}
}

// oneLine folds a multi-line error into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

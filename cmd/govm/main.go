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
	"time"

	"github.com/spf13/cobra"

	"github.com/govm/govm/internal/outq"
	"github.com/govm/govm/vmm"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// govm's exit statuses besides 0 and the guest's own (see docs/usage.md,
// "Exit status").
const (
	statusFailure  = 1 // the host or the guest failed
	statusBadInput = 2 // the user must change a flag, a file or a path
)

// exitError carries govm's exit status out of a command.
type exitError struct{ status int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.status) }

// usageError is bad input found by the CLI itself (a flag's syntax).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// errQ carries govm's own messages to stderr through a queue of their own
// (internal/outq): a stderr nobody reads (2>&1 into a stalled pipe) must
// neither block the thread that logs nor keep govm from ending.
var errQ = outq.New(os.Stderr, 256<<10)

// How long govm waits at exit for a reader to take the rest of its output:
// as long as the reader makes progress (each write done within
// outputIdle), and outputMost in all.
const (
	outputIdle = 500 * time.Millisecond
	outputMost = 30 * time.Second
)

func main() {
	// A closed stdout pipe must not kill govm mid-guest: the console
	// queue records the write error and the guest runs on.
	signal.Ignore(syscall.SIGPIPE)
	status := run(os.Args[1:])
	errQ.Close(outputIdle, outputMost)
	os.Exit(status)
}

// run executes the CLI and returns the process exit status. Errors are
// printed as one line: "govm: <what>" (the error text says how to fix it).
func run(args []string) int {
	root := newRootCmd()
	// Whatever cobra returns before a command's RunE starts (an unknown
	// command or flag, a flag value of the wrong type, extra arguments)
	// is bad input, however cobra words it.
	ran := false
	markRun(root, &ran)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.status
	}
	fmt.Fprintf(newMsgWriter(), "govm: %s\n", oneLine(err.Error()))
	return exitStatus(err, ran)
}

// exitStatus is the status for an error a command failed with: bad input
// (the CLI's flag checks, or vmm's, see vmm.IsInputError) or a failure of
// the host or the guest.
func exitStatus(err error, ran bool) int {
	var ue usageError
	if !ran || errors.As(err, &ue) || vmm.IsInputError(err) {
		return statusBadInput
	}
	return statusFailure
}

// markRun makes every command's RunE set *ran when it starts.
func markRun(c *cobra.Command, ran *bool) {
	if f := c.RunE; f != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*ran = true
			return f(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markRun(sub, ran)
	}
}

// oneLine folds a multi-line error into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

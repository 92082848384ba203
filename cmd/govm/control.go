package main

// The control-plane commands: govm list, stat, pause, resume, stop. They
// talk to a running govm over its API socket (api/, docs/api.md).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/govm/govm/api"
	"github.com/govm/govm/vmm"
)

// apiVM adapts a Machine to api.VM.
type apiVM struct {
	*vmm.Machine
	socket string
}

func (a apiVM) Stop() { a.RequestStop() }

func (a apiVM) Info() api.Info {
	i := a.Machine.Info()
	i.Socket, i.Version = a.socket, version
	return i
}

// listenAPI opens the VM's socket as --api-socket says: "" is the default
// place for the name, "none" is off (nil listener).
func listenAPI(flag, name string) (string, error) {
	switch flag {
	case "none":
		return "", nil
	case "":
		if err := api.CheckName(name); err != nil {
			return "", fmt.Errorf("--name: %w", err)
		}
		return api.SocketPath(name), nil
	}
	return flag, nil
}

// controlError gives a control command's failure its exit status: the
// user asked for a VM that is not there, not theirs, or not in a state
// for the action (2); anything else is a failure (1).
func controlError(target string, err error) error {
	err = fmt.Errorf("%s: %w", target, err)
	var re *api.RequestError
	if errors.Is(err, api.ErrNoVM) || errors.Is(err, api.ErrPermission) ||
		(errors.As(err, &re) && re.Status/100 == 4) {
		return usageError{err}
	}
	return err
}

// client finds the VM: a NAME in the socket directory, or a socket path
// (anything with a '/').
func client(target string) (*api.Client, error) {
	if strings.Contains(target, "/") {
		if _, err := os.Lstat(target); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w (no socket there)", api.ErrNoVM)
		}
		return api.NewClient(target), nil
	}
	return api.Find(target)
}

func newListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the running VMs (their API sockets in " + api.Dir() + ")",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			vms, err := api.List(api.Dir())
			if err != nil {
				return usageError{err}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				if vms == nil {
					vms = []api.Info{}
				}
				return writeJSON(w, vms)
			}
			fmt.Fprintf(w, "%-20s %8s %-8s %4s %8s %10s %s\n", "NAME", "PID", "STATE", "CPUS", "MEM", "UPTIME", "DEVICES")
			for _, v := range vms {
				fmt.Fprintf(w, "%-20s %8d %-8s %4d %7dM %10s %s\n", v.Name, v.PID, v.State, v.CPUs, v.MemBytes>>20,
					time.Since(v.Started).Truncate(time.Second), strings.Join(v.Devices, ", "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (an array of the API's /v1/vm objects)")
	return cmd
}

// newActionCmd is govm pause / resume / stop.
func newActionCmd(action, short string) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   action + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client(args[0])
			if err != nil {
				return controlError(args[0], err)
			}
			defer c.Close()
			info, err := c.Do(action)
			if err != nil {
				return controlError(args[0], err)
			}
			if action == "stop" {
				if !waitGone(c.Path, wait) {
					return fmt.Errorf("%s did not stop within %v: its govm is still running (its socket %s is still there)", info.Name, wait, c.Path)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: stopped\n", info.Name)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", info.Name, info.State)
			return nil
		},
	}
	if action == "stop" {
		cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the VM to be gone; exit 1 if it is not")
	}
	return cmd
}

// waitGone waits until the VM's govm has removed its socket (it does so
// last, after the guest's devices are closed), at most d; it reports
// whether it did.
func waitGone(path string, d time.Duration) bool {
	for end := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

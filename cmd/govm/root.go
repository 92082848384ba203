package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "govm",
		Short: "govm boots Linux guests on /dev/kvm with a serial console and virtio devices",
		Long: `govm is a lightweight KVM hypervisor in the spirit of kvmtool.

It boots a Linux-boot-protocol kernel (bzImage or ELF vmlinux) with a serial
console on COM1 and legacy virtio-PCI block and network devices.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCmd(), newVersionCmd(), newHostCmd(), newKconfigCmd(), newListCmd(), newStatCmd(), newRingsimCmd(),
		newActionCmd("pause", "Pause a running VM: its vCPUs stop and its devices take nothing from the rings"),
		newActionCmd("resume", "Resume a paused VM"),
		newActionCmd("stop", "Stop a VM cleanly, as SIGTERM does (its govm exits 0)"))
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print govm's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "govm %s\n", version)
			return nil
		},
	}
}

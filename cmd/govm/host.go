package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/govm/govm/arch/x86/cpu"
	"github.com/govm/govm/kvm"
)

func newHostCmd() *cobra.Command {
	var emulationOnly bool
	cmd := &cobra.Command{
		Use:   "host",
		Short: "Describe this host's KVM (API version, hardware virtualization)",
		Example: `  govm host
  govm host --emulation-only && echo "guest kernel code will be emulated here"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			emu, why := cpu.EmulationOnly()
			out := cmd.OutOrStdout()
			if emulationOnly {
				if !emu {
					fmt.Fprintln(out, "hardware virtualization available")
					return exitError{1}
				}
				fmt.Fprintf(out, "emulation-only KVM: %s\n", why)
				return nil
			}
			sys, err := kvm.Open(kvm.DefaultPath)
			if err != nil {
				return err
			}
			defer sys.Close()
			api, err := sys.APIVersion()
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "kvm: %s API %d\n", kvm.DefaultPath, api)
			if emu {
				fmt.Fprintf(out, "emulation-only: yes: %s\n", why) // why says what that means
			} else {
				fmt.Fprintln(out, "emulation-only: no (hardware virtualization)")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&emulationOnly, "emulation-only", false, "exit 0 if guest kernel code would be emulated, 1 otherwise")
	return cmd
}

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/govm/govm/arch/x86/cpu"
	linuxguest "github.com/govm/govm/guest/linux"
)

// newKconfigCmd is `govm kconfig`, as virtme-ng's `vng --kconfig`: the
// options a kernel needs under govm, printed or merged into a tree.
func newKconfigCmd() *cobra.Command {
	var patch bool
	cmd := &cobra.Command{
		Use:   "kconfig [KERNEL_TREE]",
		Short: "Print, or merge into a kernel tree's .config, the options a kernel needs under govm",
		Long: `Without a tree, print the Kconfig fragment: the options a Linux kernel needs to
boot under govm and drive its devices (8250 console, legacy virtio-PCI block and
network, pvpanic, devtmpfs, initramfs).

With a tree, merge them into KERNEL_TREE/.config (after make defconfig if there is
none), run make olddefconfig, and check that every option held; then build the
tree as usual and boot arch/x86/boot/bzImage with govm run.

On a host whose KVM emulates guest kernel code (govm host), Linux's user space
also needs a guest-side patch for that host's SYSCALL (Linux 6.1):
  govm kconfig --patch | patch -d KERNEL_TREE -p1`,
		Example: `  govm kconfig > govm.config
  govm kconfig ~/src/linux && make -C ~/src/linux -j"$(nproc)" bzImage
  govm run -k ~/src/linux/arch/x86/boot/bzImage --initrd initramfs.cpio`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if patch {
				if len(args) > 0 {
					return usageError{errors.New("--patch prints the patch; apply it with: govm kconfig --patch | patch -d KERNEL_TREE -p1")}
				}
				_, err := io.WriteString(out, linuxguest.SyscallPatch)
				return err
			}
			if len(args) == 0 {
				_, err := io.WriteString(out, linuxguest.Fragment)
				return err
			}
			return mergeKconfig(args[0], out, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&patch, "patch", false, "print the guest-side patch emulation-only hosts need (Linux 6.1) instead")
	return cmd
}

// mergeKconfig merges the fragment into tree/.config and checks it held.
func mergeKconfig(tree string, out, errw io.Writer) error {
	if st, err := os.Stat(filepath.Join(tree, "Kconfig")); err != nil || st.IsDir() {
		return usageError{fmt.Errorf("%s is not a kernel tree (no Kconfig file): give the top directory of a Linux source tree", tree)}
	}
	cfgPath := filepath.Join(tree, ".config")
	if _, err := os.Stat(cfgPath); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(errw, "govm: %s has no .config: starting from make defconfig\n", tree)
		if err := runMake(tree, "defconfig"); err != nil {
			return err
		}
	}
	config, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	frag := linuxguest.Options(linuxguest.Fragment)
	if err := os.WriteFile(cfgPath, linuxguest.Merge(config, frag), 0o644); err != nil {
		return err
	}
	if err := runMake(tree, "olddefconfig"); err != nil {
		return err
	}
	if config, err = os.ReadFile(cfgPath); err != nil {
		return err
	}
	if miss := linuxguest.Missing(config, frag); len(miss) > 0 {
		return fmt.Errorf("%s: after make olddefconfig these options do not hold (their dependencies are off; see make menuconfig): %s",
			cfgPath, strings.Join(miss, ", "))
	}
	fmt.Fprintf(out, "govm: merged %d options into %s\n", len(frag), cfgPath)
	if emu, _ := cpu.EmulationOnly(); emu {
		fmt.Fprintf(out, "govm: this host's KVM emulates guest kernel code: for user space to run, also apply the guest-side patch: govm kconfig --patch | patch -d %s -p1\n", tree)
	}
	return nil
}

// runMake runs make in tree with its output on failure in the error.
func runMake(tree string, target string) error {
	c := exec.Command("make", "-C", tree, target)
	if b, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("make -C %s %s: %w\n%s", tree, target, err, strings.TrimSpace(string(b)))
	}
	return nil
}

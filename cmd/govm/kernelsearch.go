package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// kernelSearchPath is where `govm run` looks for a kernel without
// --kernel, in kvmtool's order (builtin-run.c find_kernel): a kernel
// built in the current directory, the kernel tree's output, then the
// running kernel's image.
func kernelSearchPath() []string {
	paths := []string{"./bzImage", "./arch/x86/boot/bzImage"}
	// GOVM_BOOT_DIR replaces /boot (tests use it: this host's own kernel
	// must not be booted by a test of the "nothing found" case).
	boot := os.Getenv("GOVM_BOOT_DIR")
	if boot == "" {
		boot = "/boot"
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		paths = append(paths, filepath.Join(boot, "vmlinuz-"+unix.ByteSliceToString(u.Release[:])))
	}
	return paths
}

// findKernel returns the first regular file on kernelSearchPath.
func findKernel() (string, error) {
	paths := kernelSearchPath()
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no --kernel given and none of %s exists: give the path of a bzImage or vmlinux, e.g. --kernel guest/build/bzImage",
		strings.Join(paths, ", "))
}

// defaultGuestInitrd is the initramfs `govm run --exec` boots when no
// --initrd is given: the default guest's, which `make linux` (that is,
// scripts/initramfs.sh) builds and whose init runs govm.exec.
// GOVM_GUEST_INITRD overrides the place.
func defaultGuestInitrd() (string, error) {
	p := os.Getenv("GOVM_GUEST_INITRD")
	if p == "" {
		p = filepath.Join("build", "linux", "initramfs.cpio")
	}
	if _, err := os.Stat(p); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("--exec needs the default guest's initramfs and %s does not exist: build it with `make linux` (scripts/initramfs.sh) or pass --initrd", p)
		}
		return "", fmt.Errorf("--exec: default guest initramfs: %w", err)
	}
	return p, nil
}

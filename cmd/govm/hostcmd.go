package main

import (
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// Share tags the default guest's init mounts for `govm run -- CMD`
// (guest/linux/init, govm.rootfs).
const (
	rootTag = "govm-root"
	cwdTag  = "govm-cwd"
)

// hostCommand turns `govm run -- CMD ARGS...` into what the default guest's
// init runs, as virtme-ng's `vng -- CMD` does: the guest boots with
// --rootfs (default /) as its root over 9p, read-only under a tmpfs, runs
// CMD in the host's current directory (shared read-write), and govm exits
// with CMD's status (--exec's path).
func hostCommand(f *runFlags) error {
	if f.smoke.exec != "" {
		return fmt.Errorf("--exec and a command after -- both name a command; give one")
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("the command after --: the current directory: %w", err)
	}
	quoted := make([]string, len(f.command))
	for i, a := range f.command {
		quoted[i] = shellQuote(a)
	}
	f.smoke.exec = "cd " + shellQuote(cwd) + " && exec " + strings.Join(quoted, " ")
	f.shares = append(f.shares, f.rootfs+",tag="+rootTag+",ro", cwd+",tag="+cwdTag)
	f.params = strings.TrimSpace(f.params + " govm.rootfs=1 govm.cwd=" + hex.EncodeToString([]byte(cwd)))
	return nil
}

// shellQuote is s as one word of a POSIX shell command.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

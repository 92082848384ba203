package sandbox

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Confine is the sandbox's second half when govm serves host directories
// (--share): the seccomp filter must then allow the calls a 9P server
// makes on names (mkdirat, unlinkat, renameat, ...), and seccomp cannot
// see which path a call names. Landlock can: after Confine, govm may open,
// create, rename or remove by path only inside rw (any access) and ro
// (reading), and remove files in socketDir (the API socket at exit;
// "" for none). A compromised govm then reaches no other path, whatever
// the filter lets through. Descriptors opened before (disk images, the
// tap, /dev/kvm, the console) keep working: Landlock judges opening.
//
// It needs Landlock ABI 5 (Linux 6.10) for every right govm relies on,
// and uses what the kernel has otherwise (best effort); on a kernel
// without Landlock a share is refused, since the guest's confinement
// would then rest on govm's own code alone.
func Confine(rw, ro []string, socketDir string) error {
	var rules []landlock.Rule
	if len(rw) > 0 {
		rules = append(rules, landlock.RWDirs(rw...))
	}
	if len(ro) > 0 {
		rules = append(rules, landlock.RODirs(ro...))
	}
	if socketDir != "" {
		rules = append(rules, landlock.PathAccess(llsys.AccessFSRemoveFile, socketDir))
	}
	if v, err := llsys.LandlockGetABIVersion(); err != nil || v < 1 {
		return fmt.Errorf("sandbox: --share needs Landlock (Linux 5.13 or later, with the landlock LSM enabled): %v", err)
	}
	if err := landlock.V5.BestEffort().RestrictPaths(rules...); err != nil {
		return fmt.Errorf("sandbox: landlock: %w", err)
	}
	return nil
}

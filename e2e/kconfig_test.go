package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	linuxguest "github.com/govm/govm/guest/linux"
)

// TestKconfigPrints: without a tree, govm kconfig prints the fragment, and
// with --patch the guest-side patch.
func TestKconfigPrints(t *testing.T) {
	needKVM(t)
	o := runSmoke(t, "", "kconfig")
	if o.status != 0 || o.stdout != linuxguest.Fragment || !strings.Contains(o.stdout, "CONFIG_VIRTIO_PCI_LEGACY=y") {
		t.Fatalf("status %d, stdout:\n%s\nstderr: %s", o.status, o.stdout, o.stderr)
	}
	o = runSmoke(t, "", "kconfig", "--patch")
	if o.status != 0 || !strings.HasPrefix(o.stdout, "--- a/arch/x86/mm/fault.c") {
		t.Fatalf("--patch: status %d, stdout:\n%s", o.status, o.stdout)
	}
	o = runSmoke(t, "", "kconfig", t.TempDir())
	if o.status != 2 || !strings.Contains(o.stderr, "is not a kernel tree") || strings.Count(o.stderr, "\n") != 1 {
		t.Fatalf("a directory without Kconfig: status %d, stderr %q", o.status, o.stderr)
	}
}

// TestKconfigMergesIntoATree: on Debian's Linux source with no .config,
// govm kconfig starts from defconfig, merges the fragment and every option
// holds after olddefconfig; on a config that turns them off it does so
// again.
func TestKconfigMergesIntoATree(t *testing.T) {
	needKVM(t)
	if testing.Short() {
		t.Skip("-short: unpacks a kernel tree (~20 s)")
	}
	src := "/usr/src/linux-source-6.1.tar.xz"
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("%v: install linux-source-6.1 (scripts/deps.sh does)", err)
	}
	dir := t.TempDir()
	if b, err := exec.Command("tar", "-C", dir, "-xf", src).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, b)
	}
	tree := filepath.Join(dir, "linux-source-6.1")
	frag := linuxguest.Options(linuxguest.Fragment)
	for _, start := range []string{"", "tinyconfig"} {
		if start != "" {
			// A config with every virtio option off again.
			if b, err := exec.Command("make", "-C", tree, start).CombinedOutput(); err != nil {
				t.Fatalf("make %s: %v\n%s", start, err, b)
			}
			if cfg, _ := os.ReadFile(filepath.Join(tree, ".config")); len(linuxguest.Missing(cfg, frag)) == 0 {
				t.Fatalf("%s already holds the fragment: the test proves nothing", start)
			}
		}
		o := runSmoke(t, "", "kconfig", tree)
		cfg, _ := os.ReadFile(filepath.Join(tree, ".config"))
		if miss := linuxguest.Missing(cfg, frag); o.status != 0 || len(miss) > 0 || !strings.Contains(o.stdout, "merged") {
			t.Fatalf("from %q: status %d, missing %v\nstdout: %s\nstderr: %s", start, o.status, miss, o.stdout, o.stderr)
		}
	}
}

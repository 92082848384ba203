package linuxguest

import (
	"reflect"
	"strings"
	"testing"
)

func TestFragmentParses(t *testing.T) {
	opts := Options(Fragment)
	seen := map[string]bool{}
	for _, o := range opts {
		if seen[o.Name] {
			t.Errorf("%s twice in govm.config", o.Name)
		}
		seen[o.Name] = true
	}
	for _, must := range []string{"CONFIG_VIRTIO_PCI_LEGACY", "CONFIG_VIRTIO_BLK", "CONFIG_VIRTIO_NET", "CONFIG_SERIAL_8250_CONSOLE", "CONFIG_PTP_1588_CLOCK_KVM"} {
		if !seen[must] {
			t.Errorf("govm.config lacks %s", must)
		}
	}
	// Every line of the file is an option, a comment or blank.
	for _, l := range strings.Split(Fragment, "\n") {
		if _, ok := parseLine(l); !ok && l != "" && !strings.HasPrefix(l, "#") {
			t.Errorf("govm.config line %q is neither an option nor a comment", l)
		}
	}
	if !strings.Contains(SyscallPatch, "+++ b/arch/x86/mm/fault.c") {
		t.Errorf("SyscallPatch does not patch arch/x86/mm/fault.c")
	}
}

func TestOptions(t *testing.T) {
	got := Options("# comment\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"x y\"\n\nCONFIG_D=m\n#CONFIG_E is not set\nnot an option\n# CONFIG_F is set\n")
	want := []Option{{"CONFIG_A", "y"}, {Name: "CONFIG_B"}, {"CONFIG_C", `"x y"`}, {"CONFIG_D", "m"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Options = %v, want %v", got, want)
	}
}

func TestMergeAndMissing(t *testing.T) {
	config := []byte("CONFIG_A=m\n# CONFIG_B is not set\nCONFIG_C=y\nCONFIG_KEEP=y\n# a comment stays\n")
	frag := []Option{{"CONFIG_A", "y"}, {"CONFIG_B", "y"}, {Name: "CONFIG_C"}, {"CONFIG_NEW", "y"}}
	merged := string(Merge(config, frag))
	for _, want := range []string{"CONFIG_A=y\n", "CONFIG_B=y\n", "# CONFIG_C is not set\n", "CONFIG_NEW=y\n", "CONFIG_KEEP=y\n", "# a comment stays\n"} {
		if !strings.Contains(merged, want) {
			t.Errorf("merged config lacks %q:\n%s", want, merged)
		}
	}
	for _, gone := range []string{"CONFIG_A=m", "# CONFIG_B is not set", "CONFIG_C=y"} {
		if strings.Contains(merged, gone) {
			t.Errorf("merged config still has %q", gone)
		}
	}
	// A line longer than any scanner buffer survives the merge whole.
	long := "CONFIG_CMDLINE=\"" + strings.Repeat("x", 2<<20) + "\"\n"
	if got := string(Merge([]byte(long+"CONFIG_A=m"), frag)); !strings.HasPrefix(got, long) || !strings.Contains(got, "CONFIG_A=y\n") {
		t.Errorf("merging a config with a 2 MiB line lost it or the options")
	}
	if m := Missing([]byte(merged), frag); len(m) != 0 {
		t.Errorf("Missing after merge: %v", m)
	}
	// What olddefconfig might leave: A back to m, B gone, C set by a select.
	after := []byte("CONFIG_A=m\nCONFIG_C=y\nCONFIG_NEW=y\n")
	want := []string{"CONFIG_A=y (is m)", "CONFIG_B=y (is n)", "# CONFIG_C is not set (is y)"}
	if got := Missing(after, frag); !reflect.DeepEqual(got, want) {
		t.Errorf("Missing = %q, want %q", got, want)
	}
}

package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestNetTwoCreatedTaps: --net is repeatable, so two plain "--net tap"
// devices each get a tap govm creates (govm-NAME and govm-NAME-1) and
// removes at exit. Both used to be called govm-NAME, so the second failed
// with "interface already exists".
func TestNetTwoCreatedTaps(t *testing.T) {
	needNetns(t)
	ns := newNetns(t)
	res := filepath.Join(t.TempDir(), "r.json")
	o, err := runEnv(nil, 60*time.Second, "ip", "netns", "exec", ns, govmBin, "run", "--kernel", testKernel,
		"--no-default-params", "--debug-exit", "-p", "test=boot", "--name", "twonets", "--result", res,
		"--net", "tap", "--net", "tap")
	if err != nil {
		t.Fatal(err)
	}
	if o.ExitCode != 1 {
		t.Fatalf("exit status %d, want 1 (the guest's debug-exit 0)\nstderr:\n%s", o.ExitCode, o.stderr)
	}
	if !strings.Contains(o.stdout, "SUMMARY pass=") {
		t.Fatalf("the guest did not run:\n%s\nstderr:\n%s", o.stdout, o.stderr)
	}
	v := readVerdict(t, res)
	var names []string
	for _, d := range v.Devices {
		names = append(names, d.Name)
	}
	for i, tap := range []string{"govm-twonets", "govm-twonets-1"} {
		if want := fmt.Sprintf("net %d (%s)", i, tap); !slices.Contains(names, want) {
			t.Errorf("no device %q in the verdict's devices %q", want, names)
		}
		if linkExists(ns, tap) {
			t.Errorf("tap %s left behind after exit", tap)
		}
	}
}

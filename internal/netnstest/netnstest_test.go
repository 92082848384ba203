package netnstest

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

func TestNamespaceIsolated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating network namespaces needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip(8) (iproute2)")
	}
	ns, err := New(t, "govm-netnstest")
	if err != nil {
		t.Fatal(err)
	}
	// Inside: only lo, and it is up.
	err = Do(ns, func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		if len(ifs) != 1 || ifs[0].Name != "lo" || ifs[0].Flags&net.FlagUp == 0 {
			t.Errorf("interfaces in %s: %+v, want lo up only", ns, ifs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := Do("govm-no-such-namespace", func() error { return nil }); err == nil {
		t.Fatal("Do in a missing namespace succeeded")
	}
}

package main

import (
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// TestHostCommand: `govm run -- CMD ARGS` becomes --exec's command, quoted
// word by word and run in the current directory, the two shares the
// default guest's init mounts, and its parameters; --exec with it is
// refused.
func TestHostCommand(t *testing.T) {
	cwd, _ := os.Getwd()
	f := &runFlags{rootfs: "/", command: []string{"sh", "-c", "echo 'it''s'; exit 7"}}
	if err := hostCommand(f); err != nil {
		t.Fatal(err)
	}
	if want := "cd " + shellQuote(cwd) + ` && exec 'sh' '-c' 'echo '\''it'\'''\''s'\''; exit 7'`; f.smoke.exec != want {
		t.Fatalf("exec = %s\nwant   %s", f.smoke.exec, want)
	}
	if len(f.shares) != 2 || f.shares[0] != "/,tag=govm-root,ro" || f.shares[1] != cwd+",tag=govm-cwd" {
		t.Fatalf("shares %q", f.shares)
	}
	if !strings.Contains(f.params, "govm.rootfs=1 govm.cwd="+hex.EncodeToString([]byte(cwd))) {
		t.Fatalf("params %q", f.params)
	}
	g := &runFlags{rootfs: "/", command: []string{"true"}}
	g.smoke.exec = "true"
	if err := hostCommand(g); err == nil {
		t.Fatal("--exec and a command after -- both accepted")
	}
}

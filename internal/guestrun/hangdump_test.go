package guestrun

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// silentHelperEnv makes the test binary play a Go VMM whose guest prints a
// line and then goes silent because a goroutine is blocked.
const silentHelperEnv = "GUESTRUN_SILENT_HELPER"

func TestSilentHelper(t *testing.T) {
	if os.Getenv(silentHelperEnv) == "" {
		t.Skip("helper process for TestHangDump")
	}
	fmt.Println("RESULT boot pass")
	go blockedOnPurpose(make(chan struct{}))
	time.Sleep(time.Minute) // a timer, so the runtime sees no deadlock
}

// blockedOnPurpose is the name the goroutine dump must show.
func blockedOnPurpose(ch chan struct{}) { <-ch }

// TestHangDump: a VMM silent for longer than HangDump is captured (its
// threads from /proc, its goroutines from SIGQUIT) and ended; one that
// keeps printing is left alone.
func TestHangDump(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(silentHelperEnv, "1")
	p, err := Start(Options{HangDump: time.Second, HangDumpDir: dir}, os.Args[0], "-test.run=^TestSilentHelper$")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(30 * time.Second); err != nil {
		t.Fatalf("the silent VMM was not ended by the dump: %v", err)
	}
	// The file is written after the VMM's exit, which Wait saw.
	var files []string
	for end := time.Now().Add(10 * time.Second); len(files) == 0 && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
		files, _ = filepath.Glob(filepath.Join(dir, "govm-hang-*.txt"))
	}
	if len(files) != 1 {
		t.Fatalf("dump files %v, want one", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	dump := string(b)
	for _, want := range []string{
		fmt.Sprintf("VMM pid %d silent for", p.Cmd.Process.Pid),
		"loadavg ",
		"--- tid ", " state=", " wchan=", "syscall: ", "waited runnable", "in the last second",
		"SIGQUIT", "blockedOnPurpose", "goroutine ", // GOTRACEBACK=all
		"RESULT boot pass",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("dump lacks %q:\n%s", want, dump)
		}
	}

	// Output every 100 ms for 2 s: no dump with a limit 100 times that
	// interval (a 1 s limit was crossed between two ticks on a loaded CI
	// host, where forking sleep(1) took that long).
	dir2 := t.TempDir()
	p, err = Start(Options{HangDump: 10 * time.Second, HangDumpDir: dir2}, "/bin/sh", "-c",
		"for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do echo tick; sleep 0.1; done")
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("a talking VMM: exit %d, %v; want 0 (not dumped)", code, err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir2, "*")); len(files) != 0 {
		t.Errorf("a VMM that kept printing was dumped: %v", files)
	}
}

func TestHangDumpEnv(t *testing.T) {
	t.Setenv(hangDumpEnv, "bogus")
	if _, err := Start(Options{}, "/bin/true"); err == nil || !strings.Contains(err.Error(), hangDumpEnv) {
		t.Errorf("Start with %s=bogus: err = %v, want one naming the variable", hangDumpEnv, err)
	}
	t.Setenv(hangDumpEnv, "45s")
	t.Setenv(hangDumpDirEnv, "/somewhere")
	var o Options
	if err := hangDumpFromEnv(&o); err != nil || o.HangDump != 45*time.Second || o.HangDumpDir != "/somewhere" {
		t.Errorf("from env: %+v, %v", o, err)
	}
}

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govm/govm/kvm"
)

// TestBadInput checks that every kind of bad user input gives exactly one
// line on stderr, naming the problem, and exit status 2 (bad input, see
// docs/usage.md), and that no guest runs.
func TestBadInput(t *testing.T) {
	if setupErr != nil {
		t.Fatalf("setting up: %v", setupErr)
	}
	dir := t.TempDir()
	notKernel := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notKernel, []byte("this is not a kernel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(dir, "dir-as-kernel")
	if err := os.Mkdir(unreadable, 0o755); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated-bzImage")
	if img, err := os.ReadFile(testKernel); err == nil {
		if err := os.WriteFile(truncated, img[:0x300], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bigInitrd := filepath.Join(dir, "big-initrd")
	f, err := os.Create(bigInitrd)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: 200 MiB that cannot fit in a 64 MiB guest.
	if err := f.Truncate(200 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}

	emptyDisk := filepath.Join(dir, "empty.img")
	if err := os.WriteFile(emptyDisk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	lockedDisk := filepath.Join(dir, "locked.img")
	if err := os.WriteFile(lockedDisk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	// Hold the lock another govm would hold on a disk it runs.
	lf, err := os.Open(lockedDisk)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}

	k := testKernel
	cases := []struct {
		name string
		env  []string
		args []string
		want string // substring of the one stderr line
	}{
		{"no kernel flag", []string{"GOVM_BOOT_DIR=" + dir}, []string{"run"}, "no --kernel given and none of ./bzImage, ./arch/x86/boot/bzImage, " + dir + "/vmlinuz-"},
		{"missing kernel", nil, []string{"run", "--kernel", filepath.Join(dir, "nope")}, "no such file"},
		{"kernel is a directory", nil, []string{"run", "--kernel", unreadable}, "kernel"},
		{"not a kernel", nil, []string{"run", "--kernel", notKernel}, "not a Linux kernel"},
		{"truncated bzImage", nil, []string{"run", "--kernel", truncated}, "truncated"},
		{"mem zero", nil, []string{"run", "--kernel", k, "--mem", "0"}, "more than zero"},
		{"mem unparsable", nil, []string{"run", "--kernel", k, "--mem", "lots"}, "not a number"},
		{"mem larger than host", nil, []string{"run", "--kernel", k, "--mem", "64T"}, "more than the host"},
		{"cpus zero", nil, []string{"run", "--kernel", k, "--cpus", "0"}, "--cpus"},
		{"cpus beyond the MP table", nil, []string{"run", "--kernel", k, "--cpus", "255"}, "between 1 and 254"},
		{"cpus not a number", nil, []string{"run", "--kernel", k, "--cpus", "two"}, "--cpus"},
		{"unknown flag", nil, []string{"run", "--kernel", k, "--bogus"}, "unknown flag: --bogus"},
		{"command line too long", nil, []string{"run", "--kernel", k, "-p", strings.Repeat("x", 70000)}, "command line"},
		{"initrd too big", nil, []string{"run", "--kernel", k, "-m", "64M", "--initrd", bigInitrd}, "initrd"},
		{"initrd missing", nil, []string{"run", "--kernel", k, "--initrd", filepath.Join(dir, "nope")}, "initrd"},
		// Read whole, these never ended: an out-of-memory crash, a hang.
		{"kernel is /dev/zero", nil, []string{"run", "--kernel", "/dev/zero"}, "kernel /dev/zero is not a regular file (a character device)"},
		{"kernel is a FIFO", nil, []string{"run", "--kernel", fifo}, "is not a regular file (a FIFO)"},
		{"initrd is /dev/zero", nil, []string{"run", "--kernel", k, "--initrd", "/dev/zero"}, "initrd /dev/zero is not a regular file"},
		{"initrd is a FIFO", nil, []string{"run", "--kernel", k, "--initrd", fifo}, "is not a regular file (a FIFO)"},
		{"no /dev/kvm", []string{"GOVM_KVM_DEVICE=" + filepath.Join(dir, "kvm")}, []string{"run", "--kernel", k}, "no usable KVM device: open " + filepath.Join(dir, "kvm")},
		{"bad disk option", nil, []string{"run", "--kernel", k, "--disk", "x.img,bogus"}, "unknown option"},
		// Names the device it tried, and the ioctl once.
		{"not a KVM device", []string{"GOVM_KVM_DEVICE=/dev/null"}, []string{"run", "--kernel", k},
			"no usable KVM device: /dev/null is not a KVM device (KVM_GET_API_VERSION: inappropriate ioctl for device); use /dev/kvm"},
		{"missing disk", nil, []string{"run", "--kernel", k, "--disk", filepath.Join(dir, "nope.img")}, "no such file"},
		{"disk is a directory", nil, []string{"run", "--kernel", k, "--disk", dir}, "is a directory"},
		{"empty disk", nil, []string{"run", "--kernel", k, "--disk", emptyDisk}, "is empty"},
		{"locked disk", nil, []string{"run", "--kernel", k, "--disk", lockedDisk}, "locked by another process"},
		{"poll-max not a duration", nil, []string{"run", "--kernel", k, "--poll-max", "fast"}, "--poll-max \"fast\""},
		{"poll-max too long", nil, []string{"run", "--kernel", k, "--poll-max", "1s"}, "from 0 (off) to 10ms"},
		{"poll-max negative", nil, []string{"run", "--kernel", k, "--poll-max", "-5us"}, "--poll-max"},
		{"rng-rate not a rate", nil, []string{"run", "--kernel", k, "--rng-rate", "fast"}, "--rng-rate \"fast\": want bytes per second"},
		{"rng-rate negative", nil, []string{"run", "--kernel", k, "--rng-rate", "-1"}, "--rng-rate \"-1\""},
		{"disk serial too long", nil, []string{"run", "--kernel", k, "--disk", lockedDisk + ",serial=123456789012345678901"}, "longer than 20"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{govmBin}, c.args...)
			o, err := runEnv(c.env, 30*time.Second, args...)
			if err != nil {
				t.Fatal(err)
			}
			if o.ExitCode != statusBadInput {
				t.Fatalf("exit status %d, want %d (bad input)\nstderr: %s", o.ExitCode, statusBadInput, o.stderr)
			}
			lines := strings.Split(strings.TrimRight(o.stderr, "\n"), "\n")
			if len(lines) != 1 {
				t.Fatalf("stderr has %d lines, want exactly 1:\n%s", len(lines), o.stderr)
			}
			if !strings.HasPrefix(lines[0], "govm: ") || !strings.Contains(lines[0], c.want) {
				t.Fatalf("stderr %q does not start with \"govm: \" and mention %q", lines[0], c.want)
			}
			if o.stdout != "" {
				t.Fatalf("a guest ran (stdout %q)", o.stdout)
			}
		})
	}
}

// TestBadInputKVMPermission: a user who may not open /dev/kvm gets one line
// naming the device and the fix. Runs govm as nobody (needs root to switch).
func TestBadInputKVMPermission(t *testing.T) {
	if setupErr != nil {
		t.Fatalf("setting up: %v", setupErr)
	}
	if os.Geteuid() != 0 {
		t.Skip("switching to an unprivileged user needs root")
	}
	st, err := os.Stat(kvm.DefaultPath)
	if err != nil {
		t.Skipf("no /dev/kvm: %v", err)
	}
	if st.Mode().Perm()&0o006 == 0o006 {
		t.Skip("/dev/kvm is world read-writable here: nobody can open it")
	}
	// A directory nobody can reach, holding copies of govm and the kernel.
	dir, err := os.MkdirTemp("", "govm-perm")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, govmBin, filepath.Join(dir, "govm"), 0o755)
	copyFile(t, testKernel, filepath.Join(dir, "bzImage"), 0o644)
	cmd := exec.Command(filepath.Join(dir, "govm"), "run", "--kernel", filepath.Join(dir, "bzImage"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	if cmd.ProcessState.ExitCode() != statusBadInput || len(lines) != 1 ||
		!strings.Contains(lines[0], "/dev/kvm") || !strings.Contains(lines[0], "permission denied") ||
		!strings.Contains(lines[0], "kvm group") {
		t.Fatalf("exit %d, stderr %q: want exit 2 and one line naming /dev/kvm, the denial and the fix",
			cmd.ProcessState.ExitCode(), stderr.String())
	}
	if stdout.Len() != 0 {
		t.Fatalf("a guest ran: %q", stdout.String())
	}
}

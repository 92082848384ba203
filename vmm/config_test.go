package vmm

import (
	"os"
	"path/filepath"
	"testing"
)

// TestConfigCheck: every rule on what the user asked for is checked once,
// here, before New acquires anything, and fails as bad input with one
// message naming the flag.
func TestConfigCheck(t *testing.T) {
	kernel := filepath.Join(t.TempDir(), "bzImage")
	if err := os.WriteFile(kernel, []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := Config{Kernel: kernel, CPUs: 1, MemSize: 64 << 20}
	if err := good.check(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	tests := []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"no cpus", func(c *Config) { c.CPUs = 0 }, "--cpus 0: must be between 1 and 254"},
		{"too many cpus for the MP table", func(c *Config) { c.CPUs = 255 }, "--cpus 255: must be between 1 and 254"},
		{"disk serial too long", func(c *Config) {
			c.Disks = []DiskConfig{{Path: "/d.img", Serial: "123456789012345678901"}}
		}, `--disk /d.img: virtioblk: serial "123456789012345678901" is longer than 20 bytes (the GET_ID answer)`},
		{"no kernel", func(c *Config) { c.Kernel = "/nonexistent/bzImage" }, "kernel: stat /nonexistent/bzImage: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			err := c.check()
			if err == nil || err.Error() != tt.want || !IsInputError(err) {
				t.Fatalf("check() = %v (input error %v), want %q as bad input", err, IsInputError(err), tt.want)
			}
		})
	}
}

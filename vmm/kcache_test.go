package vmm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestKernelCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	c := &kernelCache{dir: dir, keep: 2}
	if _, ok := c.Get("a"); ok {
		t.Fatal("hit in an empty cache")
	}
	base := time.Unix(1_700_000_000, 0)
	defer func() { fileNow = time.Now }()
	for i, k := range []string{"a", "b", "c"} {
		fileNow = func() time.Time { return base.Add(time.Duration(i) * time.Hour) }
		c.Put(k, []byte("data-"+k))
		_ = os.Chtimes(filepath.Join(dir, k), fileNow(), fileNow())
	}
	// Keep 2: the oldest ("a") is gone, the newest two remain.
	if _, ok := c.Get("a"); ok {
		t.Fatal("oldest entry not pruned")
	}
	for _, k := range []string{"b", "c"} {
		if v, ok := c.Get(k); !ok || !bytes.Equal(v, []byte("data-"+k)) {
			t.Fatalf("Get(%q) = %q, %v", k, v, ok)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name()[0] == '.' {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
	// An unwritable directory is a silent miss, never an error.
	bad := &kernelCache{dir: "/proc/govm-no-such-dir", keep: 2}
	bad.Put("x", []byte("y"))
	if _, ok := bad.Get("x"); ok {
		t.Fatal("hit in an unwritable cache")
	}
}

func TestDefaultKernelCacheDir(t *testing.T) {
	t.Setenv("GOVM_CACHE_DIR", "off")
	if d := defaultKernelCacheDir(); d != "" {
		t.Fatalf("off: %q", d)
	}
	t.Setenv("GOVM_CACHE_DIR", "/tmp/x")
	if d := defaultKernelCacheDir(); d != "/tmp/x" {
		t.Fatalf("explicit: %q", d)
	}
}

package vmm

import (
	"os"
	"path/filepath"
	"sort"
	"time"
)

// fileNow is time.Now, a variable so tests can order cache entries.
var fileNow = time.Now

// kernelCache is bootparam.PayloadCache on disk: one file per decompressed
// payload, named by the compressed payload's SHA-256, written atomically
// (temp file + rename) and pruned to the newest few. Every failure just
// means a cache miss: the kernel is decompressed again.
type kernelCache struct {
	dir  string
	keep int
}

// defaultKernelCacheDir is $GOVM_CACHE_DIR, or the user's cache directory
// plus govm/vmlinux; "" (GOVM_CACHE_DIR=off, or no home) disables caching.
func defaultKernelCacheDir() string {
	if d, ok := os.LookupEnv("GOVM_CACHE_DIR"); ok {
		if d == "off" {
			return ""
		}
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "govm", "vmlinux")
}

func (c *kernelCache) path(key string) string { return filepath.Join(c.dir, key) }

// Get implements bootparam.PayloadCache.
func (c *kernelCache) Get(key string) ([]byte, bool) {
	b, err := os.ReadFile(c.path(key))
	if err != nil {
		return nil, false
	}
	now := fileNow()
	_ = os.Chtimes(c.path(key), now, now) // most recently used is kept longest
	return b, true
}

// Put implements bootparam.PayloadCache.
func (c *kernelCache) Put(key string, data []byte) {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(c.dir, ".tmp-"+key)
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), c.path(key)) != nil {
		os.Remove(tmp.Name())
		return
	}
	c.prune()
}

// prune removes all but the c.keep most recently used entries.
func (c *kernelCache) prune() {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type ent struct {
		name string
		mod  int64
	}
	var es []ent
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() && e.Name()[0] != '.' {
			es = append(es, ent{e.Name(), info.ModTime().UnixNano()})
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].mod > es[j].mod })
	for i := c.keep; i < len(es); i++ {
		os.Remove(c.path(es[i].name))
	}
}

// DefaultKernelCacheDir is where govm keeps decompressed kernels unless told
// otherwise ($GOVM_CACHE_DIR; "off" disables the cache).
func DefaultKernelCacheDir() string { return defaultKernelCacheDir() }

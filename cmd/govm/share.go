package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	virtio9p "github.com/govm/govm/virtio/p9"
	"github.com/govm/govm/vmm"
)

const shareUsage = "--share HOSTDIR[,tag=NAME][,ro]"

// parseShare parses one --share: a host directory, its mount tag (default:
// the directory's name), read-only or not.
func parseShare(s string) (vmm.ShareConfig, error) {
	parts := strings.Split(s, ",")
	sc := vmm.ShareConfig{Path: parts[0]}
	if sc.Path == "" {
		return sc, fmt.Errorf("--share %q: missing directory; use %s", s, shareUsage)
	}
	for _, p := range parts[1:] {
		switch {
		case p == "ro":
			sc.ReadOnly = true
		case p == "rw":
			sc.ReadOnly = false
		case strings.HasPrefix(p, "tag="):
			sc.Tag = strings.TrimPrefix(p, "tag=")
			if sc.Tag == "" || len(sc.Tag) > virtio9p.MaxTag {
				return sc, fmt.Errorf("--share %q: the tag must be 1 to %d bytes", s, virtio9p.MaxTag)
			}
		default:
			return sc, fmt.Errorf("--share %q: unknown option %q; use %s", s, p, shareUsage)
		}
	}
	fi, err := os.Stat(sc.Path)
	switch {
	case err != nil:
		return sc, fmt.Errorf("--share %q: %w", s, err)
	case !fi.IsDir():
		return sc, fmt.Errorf("--share %q: %s is not a directory; share a directory", s, sc.Path)
	}
	if sc.Tag == "" {
		abs, _ := filepath.Abs(sc.Path)
		sc.Tag = filepath.Base(abs)
		if sc.Tag == "/" || sc.Tag == "." {
			sc.Tag = "root"
		}
		if len(sc.Tag) > virtio9p.MaxTag {
			sc.Tag = sc.Tag[:virtio9p.MaxTag]
		}
	}
	return sc, nil
}

// checkShareTags refuses two shares under one tag: the guest could mount
// only one of them.
func checkShareTags(shares []vmm.ShareConfig) error {
	seen := map[string]string{}
	for _, sc := range shares {
		if prev, ok := seen[sc.Tag]; ok {
			return fmt.Errorf("--share: %s and %s both have the tag %q; give one another with ,tag=NAME", prev, sc.Path, sc.Tag)
		}
		seen[sc.Tag] = sc.Path
	}
	return nil
}

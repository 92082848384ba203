package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govm/govm/vmm"
)

// TestParseShare: --share takes a directory, an optional tag (default: the
// directory's name) and ro; anything else is one clear error; two shares
// under one tag are refused.
func TestParseShare(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	for in, want := range map[string]vmm.ShareConfig{
		dir:                  {Path: dir, Tag: "proj"},
		dir + ",tag=t,ro":    {Path: dir, Tag: "t", ReadOnly: true},
		dir + ",ro,rw,tag=x": {Path: dir, Tag: "x"},
	} {
		if got, err := parseShare(in); err != nil || got != want {
			t.Errorf("parseShare(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"":               "missing directory",
		dir + ",bogus":   `unknown option "bogus"`,
		dir + ",tag=":    "the tag must be",
		file:             "is not a directory",
		dir + "/missing": "no such file",
	} {
		if _, err := parseShare(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("parseShare(%q) = %v, want an error saying %q", in, err, msg)
		}
	}
	err := checkShareTags([]vmm.ShareConfig{{Path: "/a", Tag: "t"}, {Path: "/b", Tag: "t"}})
	if err == nil || !strings.Contains(err.Error(), `both have the tag "t"`) {
		t.Errorf("duplicate tags: %v", err)
	}
}

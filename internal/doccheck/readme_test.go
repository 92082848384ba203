package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmePaths is every `path` in the first column of README.md's Layout
// table, without trailing slashes.
func readmePaths(markdown string) map[string]bool {
	paths := map[string]bool{}
	_, table, ok := strings.Cut(markdown, "\n## Layout\n")
	if !ok {
		return paths
	}
	if i := strings.Index(table, "\n## "); i >= 0 {
		table = table[:i]
	}
	cell := regexp.MustCompile("`([^`]+)`")
	for line := range strings.SplitSeq(table, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			paths[strings.TrimSuffix(m[1], "/")] = true
		}
	}
	return paths
}

// TestReadmeLayoutListsEveryPackage: README.md's Layout table names every
// package of the module by its own directory (a parent's row does not
// count: bootparam/ says nothing about bootparam/decompress).
func TestReadmeLayoutListsEveryPackage(t *testing.T) {
	root := repoRoot(t)
	module := strings.TrimSpace(goList(t, root, "-m"))
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := readmePaths(string(md))
	if len(listed) == 0 {
		t.Fatal("README.md: no Layout table")
	}
	for pkg := range strings.FieldsSeq(goList(t, root, "./...")) {
		dir := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		if dir == "" {
			continue
		}
		if !listed[dir] {
			t.Errorf("README.md's Layout table does not list %s/: add a row (or add it to a row) saying what it is", dir)
		}
	}
}

func TestReadmePaths(t *testing.T) {
	md := "# x\n\n## Layout\n\n| path | what |\n| --- | --- |\n| `a/`, `b/c/` | x `not/this` |\n| `d` | y |\n\n## Next\n| `e/` | z |\n"
	got := readmePaths(md)
	for _, p := range []string{"a", "b/c", "d"} {
		if !got[p] {
			t.Errorf("%s not found in %v", p, got)
		}
	}
	for _, p := range []string{"not/this", "e", "path"} {
		if got[p] {
			t.Errorf("%s found in %v", p, got)
		}
	}
}

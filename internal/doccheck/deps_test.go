package doccheck

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the module root, two directories up from this file.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("runtime.Caller: no file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// goList runs the go tool in the module root.
func goList(t *testing.T, root string, args ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the dependency check needs the go tool on PATH: %v", err)
	}
	cmd := exec.Command(gobin, append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatalf("go list %v: %v", args, err)
	}
	return string(out)
}

// TestArchitectureDeps is the check itself: docs/architecture.md's deps block
// against `go list -deps` for every package of the module.
func TestArchitectureDeps(t *testing.T) {
	root := repoRoot(t)
	module := strings.TrimSpace(goList(t, root, "-m"))
	real, err := ParseGoList(module, goList(t, root, "-deps", "-f", ListTemplate, "./..."))
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ParseDoc(string(md))
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	problems := Diff(doc, real)
	for _, p := range problems {
		t.Errorf("docs/architecture.md deps block: %s", p)
	}
	if len(problems) > 0 {
		t.Logf("the block lists every package of the module with its non-standard imports; see internal/doccheck/deps.go for the format")
	}
}

func TestParseDoc(t *testing.T) {
	good := "text\n```\nnot -> this\n```\n```deps\n# comment\n\na -> b c\na -> d\nb ->\nc -/-> x y\n```\nafter -> ignored\n"
	d, err := ParseDoc(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := sorted(d.Imports["a"]); !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Errorf("a -> %v, want b c d (lines add up)", got)
	}
	if d.Imports["b"] == nil || len(d.Imports["b"]) != 0 {
		t.Errorf("b -> %v, want listed with no imports", d.Imports["b"])
	}
	if got := sorted(d.Never["c"]); !slices.Equal(got, []string{"x", "y"}) || d.Imports["c"] != nil {
		t.Errorf("c -/-> %v, imports %v", got, d.Imports["c"])
	}
	if d.Imports["not"] != nil || d.Imports["after"] != nil {
		t.Errorf("lines outside the block were read: %v", d.Imports)
	}
	for name, md := range map[string]string{
		"no block":   "```\na -> b\n```\n",
		"two blocks": "```deps\na ->\n```\n```deps\nb ->\n```\n",
		"unclosed":   "```deps\na -> b\n",
		"no arrow":   "```deps\na b\n```\n",
		"bare name":  "```deps\na\n```\n",
		"empty rule": "```deps\na -/->\n```\n",
		"bad arrow":  "```deps\na => b\n```\n",
	} {
		if _, err := ParseDoc(md); !errors.Is(err, ErrBlock) {
			t.Errorf("%s: err = %v, want ErrBlock", name, err)
		}
	}
}

const listOut = `example.com/m true example.com/m/b fmt github.com/x/y
example.com/m/b true example.com/m/c os
example.com/m/c true
github.com/x/y false example.com/m/c golang.org/x/z
golang.org/x/z false
`

func TestParseGoList(t *testing.T) {
	r, err := ParseGoList("example.com/m", listOut)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Packages, []string{".", "b", "c"}) {
		t.Errorf("packages %v", r.Packages)
	}
	if got := sorted(r.Imports["."]); !slices.Equal(got, []string{"b", "github.com/x/y"}) {
		t.Errorf(". -> %v (fmt is standard: dropped)", got)
	}
	if got := sorted(r.Imports["b"]); !slices.Equal(got, []string{"c"}) {
		t.Errorf("b -> %v", got)
	}
	if got := sorted(r.Imports["github.com/x/y"]); !slices.Equal(got, []string{"c", "golang.org/x/z"}) {
		t.Errorf("github.com/x/y -> %v", got)
	}
	for _, bad := range []string{"", "just-a-path\n", "a maybe b\n", "golang.org/x/z false\n"} {
		if _, err := ParseGoList("example.com/m", bad); err == nil {
			t.Errorf("ParseGoList(%q) accepted", bad)
		}
	}
}

func TestDiff(t *testing.T) {
	real, err := ParseGoList("example.com/m", listOut)
	if err != nil {
		t.Fatal(err)
	}
	agree := "```deps\n. -> b github.com/x/y\nb -> c\nc ->\nb -/-> github.com/x/y\n```\n"
	if d, err := ParseDoc(agree); err != nil || Diff(d, real) != nil {
		t.Fatalf("agreeing doc: %v %v", err, Diff(d, real))
	}
	for _, tc := range []struct {
		name, block string
		want        []string // substrings, one per problem, in order
	}{
		{"dropped arrow", ". -> github.com/x/y\nb -> c\nc ->",
			[]string{`missing arrow . -> b: . imports b; add "b" to a ". ->" line`}},
		{"extra arrow", ". -> b github.com/x/y\nb -> c github.com/x/y\nc ->",
			[]string{`extra arrow b -> github.com/x/y: b does not import github.com/x/y; remove "github.com/x/y" from its "b ->" line`}},
		{"new package", ". -> b github.com/x/y\nb -> c",
			[]string{`package c is missing: add the line "c ->"`}},
		{"new package with imports", ". -> b github.com/x/y\nc ->",
			[]string{`package b is missing: add the line "b -> c"`}},
		{"gone package", ". -> b github.com/x/y\nb -> c\nc ->\nlayout -> c",
			[]string{`"layout" is not a package of example.com/m (go list ./...): remove its "layout ->" line`}},
		{"broken rule", ". -> b github.com/x/y\nb -> c\nc ->\n. -/-> golang.org/x/z",
			[]string{"rule . -/-> golang.org/x/z broken: . -> github.com/x/y -> golang.org/x/z"}},
		{"rule on unknown package", ". -> b github.com/x/y\nb -> c\nc ->\nq -/-> c",
			[]string{`"q" is not a package of example.com/m`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseDoc("```deps\n" + tc.block + "\n```\n")
			if err != nil {
				t.Fatal(err)
			}
			got := Diff(d, real)
			if len(got) != len(tc.want) {
				t.Fatalf("Diff = %q, want %d problems", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

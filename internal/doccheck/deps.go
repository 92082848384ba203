// Package doccheck keeps docs/ true to the code. Its tests compare the
// package dependency block in docs/architecture.md with what `go list`
// reports, so a new import or a new package that the document does not show
// fails `make test` with the exact line to add; and they check that
// README.md's Layout table names every package.
//
// The block is a fenced code block whose info string is "deps". Each line is
// one of
//
//	pkg -> dep dep ...     pkg imports each dep (directly)
//	pkg ->                 pkg imports nothing outside the standard library
//	pkg -/-> dep dep ...   pkg must never depend on dep, not even indirectly
//
// Module packages are written as their path inside the module ("virtio/blk"),
// other packages by their full import path ("golang.org/x/sys/unix"); the
// standard library is left out. A package may have several "->" lines: their
// arrows add up, so long lists can be split by theme. Blank lines and lines
// starting with '#' are ignored.
package doccheck

import (
	"bufio"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ErrBlock means the deps block is missing, repeated, unterminated or holds a
// line that is none of the three forms.
var ErrBlock = errors.New("doccheck: deps block")

// Graph maps a package to the set of packages it imports (or, for rules, must
// never reach).
type Graph map[string]map[string]bool

// add records from -> to, creating from's entry even when to is empty.
func (g Graph) add(from string, to ...string) {
	if g[from] == nil {
		g[from] = map[string]bool{}
	}
	for _, t := range to {
		g[from][t] = true
	}
}

// Doc is what the deps block says.
type Doc struct {
	Imports Graph // "->" lines: every module package, with its direct imports
	Never   Graph // "-/->" lines: transitive dependencies that must not exist
}

// Block markers. The info string makes the block findable while leaving it an
// ordinary code block for anyone reading the rendered document.
const (
	fenceOpen  = "```deps"
	fenceClose = "```"
)

// ParseDoc finds the single deps block in a Markdown document and parses it.
func ParseDoc(markdown string) (Doc, error) {
	d := Doc{Imports: Graph{}, Never: Graph{}}
	sc := bufio.NewScanner(strings.NewReader(markdown))
	in, found, lineNo := false, false, 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && line == fenceOpen:
			if found {
				return Doc{}, fmt.Errorf("%w: second %q block at line %d; keep one", ErrBlock, fenceOpen, lineNo)
			}
			in, found = true, true
		case !in:
		case line == fenceClose:
			in = false
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			if err := d.parseLine(line); err != nil {
				return Doc{}, fmt.Errorf("%w: line %d: %v", ErrBlock, lineNo, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Doc{}, fmt.Errorf("%w: %v", ErrBlock, err)
	}
	switch {
	case !found:
		return Doc{}, fmt.Errorf("%w: no %q block", ErrBlock, fenceOpen)
	case in:
		return Doc{}, fmt.Errorf("%w: %q block is not closed", ErrBlock, fenceOpen)
	}
	return d, nil
}

func (d Doc) parseLine(line string) error {
	f := strings.Fields(line)
	if len(f) < 2 || (f[1] != "->" && f[1] != "-/->") {
		return fmt.Errorf("%q: want \"pkg -> dep ...\" or \"pkg -/-> dep ...\"", line)
	}
	if f[1] == "-/->" {
		if len(f) == 2 {
			return fmt.Errorf("%q: a -/-> line names at least one package", line)
		}
		d.Never.add(f[0], f[2:]...)
		return nil
	}
	d.Imports.add(f[0], f[2:]...)
	return nil
}

// Real is the dependency graph as the go tool reports it.
type Real struct {
	// Module is the main module's path; its packages are named relative to it.
	Module string
	// Imports holds every non-standard package reached from the module's
	// packages (module ones relative, others in full) with its non-standard
	// direct imports. Module packages are the keys without a '.' in their
	// first element.
	Imports Graph
	// Packages lists the module's own packages.
	Packages []string
}

// ListTemplate is the go list -f template whose output ParseGoList reads: for
// every non-standard package, its import path, "true" when it belongs to the
// main module (else "false"), then its direct imports (test files excluded:
// the block is about what the product links).
const ListTemplate = `{{if not .Standard}}{{.ImportPath}} {{if .Module}}{{.Module.Main}}{{else}}false{{end}}{{range .Imports}} {{.}}{{end}}{{end}}`

// ParseGoList reads the output of
//
//	go list -deps -f ListTemplate ./...
//
// run in the module root. Standard-library imports are dropped: a package
// counts as non-standard exactly when go list printed a line for it.
func ParseGoList(module, out string) (Real, error) {
	type row struct {
		path    string
		main    bool
		imports []string
	}
	var rows []row
	nonStd := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 || (f[1] != "true" && f[1] != "false") {
			return Real{}, fmt.Errorf("doccheck: unexpected go list line %q", line)
		}
		rows = append(rows, row{f[0], f[1] == "true", f[2:]})
		nonStd[f[0]] = true
	}
	r := Real{Module: module, Imports: Graph{}}
	for _, rw := range rows {
		from := r.name(rw.path)
		r.Imports.add(from)
		if rw.main {
			r.Packages = append(r.Packages, from)
		}
		for _, imp := range rw.imports {
			if nonStd[imp] {
				r.Imports.add(from, r.name(imp))
			}
		}
	}
	if len(r.Packages) == 0 {
		return Real{}, fmt.Errorf("doccheck: go list reported no package of module %s", module)
	}
	sort.Strings(r.Packages)
	return r, nil
}

// name is how the deps block writes an import path.
func (r Real) name(path string) string {
	if path == r.Module {
		return "."
	}
	if rel, ok := strings.CutPrefix(path, r.Module+"/"); ok {
		return rel
	}
	return path
}

// Diff lists every disagreement between the document and the real graph, one
// sentence each, saying which line to add, change or remove. Nil means they
// agree.
func Diff(doc Doc, real Real) []string {
	var out []string
	isPkg := map[string]bool{}
	for _, p := range real.Packages {
		isPkg[p] = true
		got, listed := doc.Imports[p], doc.Imports[p] != nil
		want := moduleFirst(sorted(real.Imports[p]))
		if !listed {
			out = append(out, fmt.Sprintf("package %s is missing: add the line %q", p, strings.TrimSpace(p+" -> "+strings.Join(want, " "))))
			continue
		}
		for _, dep := range want {
			if !got[dep] {
				out = append(out, fmt.Sprintf("missing arrow %s -> %s: %s imports %s; add %q to a %q line", p, dep, p, dep, dep, p+" ->"))
			}
		}
		for _, dep := range sorted(got) {
			if !real.Imports[p][dep] {
				out = append(out, fmt.Sprintf("extra arrow %s -> %s: %s does not import %s; remove %q from its %q line", p, dep, p, dep, dep, p+" ->"))
			}
		}
	}
	for _, p := range sorted(doc.Imports) {
		if !isPkg[p] {
			out = append(out, fmt.Sprintf("%q is not a package of %s (go list ./...): remove its %q line", p, real.Module, p+" ->"))
		}
	}
	for _, p := range sorted(doc.Never) {
		if !isPkg[p] {
			out = append(out, fmt.Sprintf("%q is not a package of %s: remove or fix its %q line", p, real.Module, p+" -/->"))
			continue
		}
		for _, bad := range sorted(doc.Never[p]) {
			if path := real.pathTo(p, bad); path != nil {
				out = append(out, fmt.Sprintf("rule %s -/-> %s broken: %s; remove that import or, if the layering changed on purpose, the rule", p, bad, strings.Join(path, " -> ")))
			}
		}
	}
	return out
}

// pathTo returns a shortest import chain from -> ... -> to, or nil.
func (r Real) pathTo(from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var path []string
			for ; p != ""; p = prev[p] {
				path = append(path, p)
			}
			slices.Reverse(path)
			return path
		}
		for _, dep := range sorted(r.Imports[p]) {
			if _, seen := prev[dep]; !seen {
				prev[dep] = p
				queue = append(queue, dep)
			}
		}
	}
	return nil
}

// moduleFirst orders module packages before outside ones (whose first path
// element has a dot), as the block writes them.
func moduleFirst(names []string) []string {
	outside := func(n string) bool { first, _, _ := strings.Cut(n, "/"); return strings.Contains(first, ".") }
	slices.SortStableFunc(names, func(a, b string) int {
		switch oa, ob := outside(a), outside(b); {
		case oa == ob:
			return 0
		case oa:
			return 1
		}
		return -1
	})
	return names
}

func sorted[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

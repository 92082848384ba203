package layout

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// bootDoc is the document whose memory-map table must agree with this
// package, and mapHeading the section that holds the table.
const (
	bootDoc    = "../../../docs/boot.md"
	mapHeading = "## Guest physical memory"
)

// TestBootDocTableMatchesConstants checks docs/boot.md's memory-map table
// against this package both ways: every row's addresses equal the values
// of the constants it names, and every exported constant appears in a row.
// The constants are read from this package's source with go/types, not
// from a list in the test, so a constant added without a row fails too.
func TestBootDocTableMatchesConstants(t *testing.T) {
	doc, err := os.ReadFile(bootDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseMapTable(string(doc))
	if err != nil {
		t.Fatalf("%s: %v", bootDoc, err)
	}
	consts := exportedConstants(t)
	if errs := checkTable(rows, consts); len(errs) > 0 {
		t.Errorf("%s %q table disagrees with package layout:\n  %s", bootDoc, mapHeading, strings.Join(errs, "\n  "))
	}
}

// mapRow is one row of the table: the address cell (one address, or a
// half-open range "start-end"), the constants it names in the same shape,
// and the description.
type mapRow struct {
	line  int
	addrs []uint64
	names []string
	what  string
}

var backticked = regexp.MustCompile("`([A-Za-z0-9_]+)`")

// parseMapTable finds the first table after mapHeading. Its header must be
// "address | constant | what"; each row's address cell is "0xA" or
// "0xA-0xB", and its constant cell names as many constants, in backticks,
// joined the same way.
func parseMapTable(doc string) ([]mapRow, error) {
	lines := strings.Split(doc, "\n")
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) != mapHeading {
		i++
	}
	if i == len(lines) {
		return nil, fmt.Errorf("no %q section", mapHeading)
	}
	for i < len(lines) && !strings.HasPrefix(lines[i], "|") {
		if i > 0 && strings.HasPrefix(lines[i], "## ") && strings.TrimSpace(lines[i]) != mapHeading {
			return nil, fmt.Errorf("no table in %q", mapHeading)
		}
		i++
	}
	if i+1 >= len(lines) {
		return nil, fmt.Errorf("no table in %q", mapHeading)
	}
	if h := cells(lines[i]); len(h) != 3 || h[0] != "address" || h[1] != "constant" || h[2] != "what" {
		return nil, fmt.Errorf("line %d: table header %q, want | address | constant | what |", i+1, lines[i])
	}
	var rows []mapRow
	for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		c := cells(lines[i])
		if len(c) != 3 {
			return nil, fmt.Errorf("line %d: %d cells, want 3", i+1, len(c))
		}
		r := mapRow{line: i + 1, what: c[2]}
		for _, a := range strings.Split(c[0], "-") {
			v, err := strconv.ParseUint(strings.ReplaceAll(strings.TrimSpace(a), "_", ""), 0, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: address %q: %v", i+1, c[0], err)
			}
			r.addrs = append(r.addrs, v)
		}
		for _, part := range strings.Split(c[1], "-") {
			m := backticked.FindAllStringSubmatch(part, -1)
			if len(m) != 1 || strings.TrimSpace(part) != m[0][0] {
				return nil, fmt.Errorf("line %d: constant cell %q: want `Name` or `Start`-`End`", i+1, c[1])
			}
			r.names = append(r.names, m[0][1])
		}
		if len(r.addrs) > 2 || len(r.addrs) != len(r.names) {
			return nil, fmt.Errorf("line %d: %d addresses for %d constants", i+1, len(r.addrs), len(r.names))
		}
		if len(r.addrs) == 2 && r.addrs[0] >= r.addrs[1] {
			return nil, fmt.Errorf("line %d: empty range %#x-%#x", i+1, r.addrs[0], r.addrs[1])
		}
		if r.what == "" {
			return nil, fmt.Errorf("line %d: no description", i+1)
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("empty table in %q", mapHeading)
	}
	return rows, nil
}

// cells splits a Markdown table line into trimmed cells.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	var c []string
	for _, s := range strings.Split(line, "|") {
		c = append(c, strings.TrimSpace(s))
	}
	return c
}

// checkTable returns one message per disagreement between rows and consts.
func checkTable(rows []mapRow, consts map[string]uint64) []string {
	var errs []string
	seen := map[string]bool{}
	for _, r := range rows {
		for k, name := range r.names {
			v, ok := consts[name]
			switch {
			case !ok:
				errs = append(errs, fmt.Sprintf("line %d: %s is not an exported constant of package layout", r.line, name))
			case v != r.addrs[k]:
				errs = append(errs, fmt.Sprintf("line %d: table says %s = %#x, package layout says %#x", r.line, name, r.addrs[k], v))
			}
			seen[name] = true
		}
	}
	var missing []string
	for name, v := range consts {
		if !seen[name] {
			missing = append(missing, fmt.Sprintf("%s (%#x) has no row in the table", name, v))
		}
	}
	sort.Strings(missing)
	return append(errs, missing...)
}

// exportedConstants type-checks this package's non-test source and returns
// the value of every exported constant.
func exportedConstants(t *testing.T) map[string]uint64 {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// No importer: package layout is a leaf, and this keeps it one.
	pkg, err := (&types.Config{}).Check("layout", fset, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]uint64{}
	for _, name := range pkg.Scope().Names() {
		c, ok := pkg.Scope().Lookup(name).(*types.Const)
		if !ok || !c.Exported() {
			continue
		}
		v, exact := constant.Uint64Val(constant.ToInt(c.Val()))
		if !exact {
			t.Fatalf("constant %s = %v is not an address", name, c.Val())
		}
		consts[name] = v
	}
	if len(consts) == 0 {
		t.Fatal("no exported constants found in package layout")
	}
	return consts
}

// TestCheckTableCatchesDisagreement shows the checker fails for each kind
// of disagreement, on a table built in the test.
func TestCheckTableCatchesDisagreement(t *testing.T) {
	consts := map[string]uint64{"A": 0x500, "B": 0x1000, "C": 0x2000}
	const head = mapHeading + "\n\ntext\n\n| address | constant | what |\n| --- | --- | --- |\n"
	tests := []struct {
		name, table string
		want        string // substring of the error; "" means agreement
	}{
		{"agree", "| 0x500 | `A` | a |\n| 0x1000-0x2000 | `B`-`C` | b to c |\n", ""},
		{"wrong value", "| 0x501 | `A` | a |\n| 0x1000-0x2000 | `B`-`C` | b to c |\n", "table says A = 0x501, package layout says 0x500"},
		{"wrong range end", "| 0x500 | `A` | a |\n| 0x1000-0x3000 | `B`-`C` | b to c |\n", "C = 0x3000"},
		{"row missing", "| 0x500 | `A` | a |\n| 0x1000 | `B` | b |\n", "C (0x2000) has no row"},
		{"unknown constant", "| 0x500 | `A` | a |\n| 0x1000-0x2000 | `B`-`C` | b |\n| 0x9 | `D` | d |\n", "D is not an exported constant"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := parseMapTable(head + tc.table)
			if err != nil {
				t.Fatal(err)
			}
			errs := strings.Join(checkTable(rows, consts), "\n")
			if tc.want == "" && errs != "" || tc.want != "" && !strings.Contains(errs, tc.want) {
				t.Fatalf("errors %q, want %q", errs, tc.want)
			}
		})
	}
	for _, bad := range []string{
		"| 0x500 | A | no backticks |\n",
		"| 0x500-0x600 | `A` | one name for a range |\n",
		"| 0x600-0x500 | `B`-`A` | reversed |\n",
		"| five | `A` | not a number |\n",
		"| 0x500 | `A` |\n",
	} {
		if _, err := parseMapTable(head + bad); err == nil {
			t.Errorf("table row %q parsed without error", bad)
		}
	}
	if _, err := parseMapTable("# no section\n"); err == nil {
		t.Error("document without the section parsed without error")
	}
}

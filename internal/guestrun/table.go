package guestrun

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

// ErrTable marks a guest/tests.cfg that breaks its format (see the comment at
// the top of that file). The file is read strictly: a misspelt key would
// otherwise be ignored and its entry run with the wrong configuration.
var ErrTable = errors.New("guestrun: tests.cfg")

// NoDefaultGroup is the group (kvm-unit-tests' name for it) whose entries run
// only when a run asks for one of their groups by name.
const NoDefaultGroup = "nodefault"

// tableKeys are the keys an entry may have; the header of guest/tests.cfg
// says what each means.
var tableKeys = []string{"cmdline", "memory", "cpus", "needs", "disks", "disk_after",
	"expected_exit", "results", "may_skip", "groups", "timeout"}

// TableEntry is one [section] of guest/tests.cfg: the VM configuration and
// expectations of one run of the test kernel.
type TableEntry struct {
	Name string
	// KV holds every key of the section as written (values trimmed).
	KV map[string]string
	// Groups, Results and MaySkip are the words of groups=, results= and
	// may_skip=. MaySkip names RESULT lines that may say skip; each is in
	// Results.
	Groups, Results, MaySkip []string
}

// InGroup says whether e belongs to group g.
func (e TableEntry) InGroup(g string) bool { return slices.Contains(e.Groups, g) }

// ReadTable reads and parses a tests.cfg file.
func ReadTable(path string) ([]TableEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTable, err)
	}
	defer f.Close()
	return ParseTable(f)
}

// ParseTable parses the tests.cfg format: '#' comments, "[name]" sections, and
// "key = value" lines. Unknown or repeated keys, repeated sections, a key
// outside a section, and entries without cmdline=, expected_exit=, results=
// or groups= are ErrTable, as is a may_skip name that is not in results.
func ParseTable(r io.Reader) ([]TableEntry, error) {
	var out []TableEntry
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			name := strings.TrimSpace(line[1 : len(line)-1])
			if name == "" || seen[name] {
				return nil, fmt.Errorf("%w: line %d: section %q is empty or repeated", ErrTable, n, line)
			}
			seen[name] = true
			out = append(out, TableEntry{Name: name, KV: map[string]string{}})
		default:
			k, v, ok := strings.Cut(line, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch {
			case !ok:
				return nil, fmt.Errorf("%w: line %d: %q is not key = value", ErrTable, n, line)
			case len(out) == 0:
				return nil, fmt.Errorf("%w: line %d: %q before the first [section]", ErrTable, n, line)
			case !slices.Contains(tableKeys, k):
				return nil, fmt.Errorf("%w: line %d: unknown key %q (known: %s)", ErrTable, n, k, strings.Join(tableKeys, " "))
			}
			e := &out[len(out)-1]
			if _, dup := e.KV[k]; dup {
				return nil, fmt.Errorf("%w: line %d: [%s] has %s twice", ErrTable, n, e.Name, k)
			}
			e.KV[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTable, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no entries", ErrTable)
	}
	for i := range out {
		e := &out[i]
		for _, k := range []string{"cmdline", "expected_exit", "results", "groups"} {
			if strings.TrimSpace(e.KV[k]) == "" {
				return nil, fmt.Errorf("%w: [%s] has no %s", ErrTable, e.Name, k)
			}
		}
		e.Groups = strings.Fields(e.KV["groups"])
		e.Results = strings.Fields(e.KV["results"])
		e.MaySkip = strings.Fields(e.KV["may_skip"])
		for _, s := range e.MaySkip {
			if !slices.Contains(e.Results, s) {
				return nil, fmt.Errorf("%w: [%s] may_skip %q is not one of its results", ErrTable, e.Name, s)
			}
		}
	}
	return out, nil
}

// SelectGroups picks the entries a run should boot. With no groups, that is
// every entry not in NoDefaultGroup; otherwise every entry in at least one of
// groups (NoDefaultGroup ones included: naming a group asks for it). A group
// no entry has is an error, so a misspelt selection does not pass by running
// nothing.
func SelectGroups(entries []TableEntry, groups []string) ([]TableEntry, error) {
	known := map[string]bool{}
	for _, e := range entries {
		for _, g := range e.Groups {
			known[g] = true
		}
	}
	for _, g := range groups {
		if !known[g] {
			return nil, fmt.Errorf("%w: no entry is in group %q (groups: %s)", ErrTable, g, strings.Join(slices.Sorted(maps.Keys(known)), " "))
		}
	}
	var out []TableEntry
	for _, e := range entries {
		pick := !e.InGroup(NoDefaultGroup)
		if len(groups) > 0 {
			pick = slices.ContainsFunc(groups, e.InGroup)
		}
		if pick {
			out = append(out, e)
		}
	}
	return out, nil
}

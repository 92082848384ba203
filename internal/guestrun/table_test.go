package guestrun

import (
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const sampleTable = `# comment
[boot]
cmdline = test=boot
expected_exit = 1
results = cmdline e820
groups = boot

[hostile]
cmdline = test=hostile-blk
needs = disk
expected_exit = 1
results = hostile-loop hostile-indirect-len
may_skip = hostile-indirect-len
groups = blk hostile

[net]
cmdline = test=net-echo
needs = net
expected_exit = 1
results = net-echo
groups = net nodefault
`

func names(es []TableEntry) string {
	var n []string
	for _, e := range es {
		n = append(n, e.Name)
	}
	return strings.Join(n, " ")
}

func TestParseTable(t *testing.T) {
	es, err := ParseTable(strings.NewReader(sampleTable))
	if err != nil {
		t.Fatal(err)
	}
	if names(es) != "boot hostile net" {
		t.Fatalf("entries %q", names(es))
	}
	h := es[1]
	if !slices.Equal(h.Groups, []string{"blk", "hostile"}) || !slices.Equal(h.MaySkip, []string{"hostile-indirect-len"}) ||
		!slices.Equal(h.Results, []string{"hostile-loop", "hostile-indirect-len"}) || h.KV["needs"] != "disk" {
		t.Errorf("hostile entry %+v", h)
	}
	if len(es[0].MaySkip) != 0 || !es[2].InGroup(NoDefaultGroup) {
		t.Errorf("boot %+v, net %+v", es[0], es[2])
	}
	base := "[a]\ncmdline = x\nexpected_exit = 1\nresults = r s\ngroups = g\n"
	for name, text := range map[string]string{
		"unknown key":           base + "may_skp = r\n",
		"repeated key":          base + "groups = h\n",
		"repeated section":      base + base,
		"empty section":         "[]\n",
		"key before section":    "cmdline = x\n" + base,
		"not key = value":       base + "groups\n",
		"no groups":             strings.Replace(base, "groups = g\n", "", 1),
		"empty groups":          strings.Replace(base, "groups = g", "groups =", 1),
		"no results":            strings.Replace(base, "results = r s\n", "", 1),
		"no cmdline":            strings.Replace(base, "cmdline = x\n", "", 1),
		"no expected_exit":      strings.Replace(base, "expected_exit = 1\n", "", 1),
		"may_skip not a result": base + "may_skip = r t\n",
		"no entries":            "# nothing\n",
	} {
		if _, err := ParseTable(strings.NewReader(text)); !errors.Is(err, ErrTable) {
			t.Errorf("%s: err = %v, want ErrTable", name, err)
		}
	}
}

func TestSelectGroups(t *testing.T) {
	es, err := ParseTable(strings.NewReader(sampleTable))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		groups []string
		want   string
	}{
		{nil, "boot hostile"}, // nodefault left out
		{[]string{"blk"}, "hostile"},
		{[]string{"boot", "hostile"}, "boot hostile"},
		{[]string{"net"}, "net"}, // asked for by name
		{[]string{"nodefault"}, "net"},
	} {
		got, err := SelectGroups(es, tc.groups)
		if err != nil || names(got) != tc.want {
			t.Errorf("SelectGroups(%v) = %q, %v; want %q", tc.groups, names(got), err, tc.want)
		}
	}
	if _, err := SelectGroups(es, []string{"blk", "hostle"}); !errors.Is(err, ErrTable) || !strings.Contains(err.Error(), `"hostle"`) {
		t.Errorf("misspelt group: err = %v", err)
	}
}

// TestTestsCfg parses the repository's own guest/tests.cfg, so a broken
// table fails here, without /dev/kvm, and not only in e2e's
// TestGuestTable.
func TestTestsCfg(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	es, err := ReadTable(filepath.Join(filepath.Dir(file), "..", "..", "guest", "tests.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	def, err := SelectGroups(es, nil)
	if err != nil || len(def) == 0 {
		t.Fatalf("default selection %q, %v", names(def), err)
	}
}

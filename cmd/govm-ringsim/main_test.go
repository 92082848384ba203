package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runRingsim(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRingsimCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// The promise of --svg: a plot a person can read without the table, one
// labelled line per layout across ring fullness, with named axes.
func TestRingsimSVG(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "out.svg")
	out, err := runRingsim(t, "--svg", svg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasPrefix(strings.TrimSpace(s), "<?xml") || !strings.Contains(s, "<svg") {
		t.Fatalf("%s is not an SVG document: %.80q", svg, s)
	}
	for _, label := range []string{"split", "packed", "split indirect", "packed indirect",
		"polling driver", "ring fullness", "transfers per buffer"} {
		if !strings.Contains(s, label) {
			t.Errorf("the plot has no text %q", label)
		}
	}
	// Eight curves, each drawn as a path.
	if n := strings.Count(s, "<path"); n < 8 {
		t.Errorf("%d paths in the plot, want at least one per curve (8)", n)
	}
	// The table is still printed.
	if !strings.Contains(out, "scenario") || !strings.Contains(out, "packed n=2") {
		t.Errorf("table missing from stdout:\n%.500s", out)
	}
}

func TestRingsimJSON(t *testing.T) {
	out, err := runRingsim(t, "--json", "--line", "128")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Scenario string                `json:"scenario"`
		Line     uint64                `json:"line"`
		Driver   float64               `json:"driver"`
		Device   float64               `json:"device"`
		Total    float64               `json:"total"`
		ByField  map[string][2]float64 `json:"by_field"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("--json output does not parse: %v\n%.300s", err, out)
	}
	if len(rows) < 50 {
		t.Fatalf("%d rows, want the fullness sweep and the scenarios", len(rows))
	}
	for _, r := range rows {
		if r.Line != 128 {
			t.Fatalf("%s: line %d, asked for 128", r.Scenario, r.Line)
		}
		var sum float64
		for _, v := range r.ByField {
			sum += v[0] + v[1]
		}
		if d := sum - r.Total; d > 1e-9 || d < -1e-9 || r.Total <= 0 || r.Driver+r.Device-r.Total > 1e-9 {
			t.Fatalf("%s: fields add to %.4f, total %.4f (driver %.4f + device %.4f)", r.Scenario, sum, r.Total, r.Driver, r.Device)
		}
	}
}

func TestRingsimBadLine(t *testing.T) {
	_, err := runRingsim(t, "--line", "32")
	if err == nil || !strings.Contains(err.Error(), "--line 64") {
		t.Fatalf("--line 32: %v, want an error saying to pass --line 64 or 128", err)
	}
}

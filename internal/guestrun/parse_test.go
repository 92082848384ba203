package guestrun

import (
	"errors"
	"strings"
	"testing"
)

func TestParseResult(t *testing.T) {
	for _, tc := range []struct {
		line    string
		name    string
		pass    bool
		skip    bool
		keys    string // comma-separated, in order
		kv      map[string]string
		wantErr error
	}{
		{line: "RESULT boot pass", name: "boot", pass: true},
		{line: "RESULT blk-basic fail irqs=3 msg_hex=6869\r", name: "blk-basic",
			keys: "irqs,msg_hex", kv: map[string]string{"irqs": "3", "msg_hex": "6869"}},
		{line: "RESULT x pass k=", name: "x", pass: true, keys: "k", kv: map[string]string{"k": ""}},
		{line: "[    1.234] virtio: RESULT x pass a=b=c", name: "x", pass: true, keys: "a", kv: map[string]string{"a": "b=c"}},
		{line: "RESULT hostile-indirect-len skip reason=no_indirect recovered=1", name: "hostile-indirect-len", skip: true,
			keys: "reason,recovered", kv: map[string]string{"reason": "no_indirect", "recovered": "1"}},
		{line: "RESULT x skip", wantErr: ErrMalformed},
		{line: "RESULT x skip reason=", wantErr: ErrMalformed},
		{line: "RESULT x skip why=none", wantErr: ErrMalformed},
		{line: "RESULT x skipped reason=a", wantErr: ErrMalformed},
		{line: "RESULT boot", wantErr: ErrMalformed},
		{line: "RESULT boot ok", wantErr: ErrMalformed},
		{line: "RESULTS boot pass", wantErr: ErrMalformed},
		{line: "RESULT boot pass novalue", wantErr: ErrMalformed},
		{line: "RESULT boot pass =v", wantErr: ErrMalformed},
		{line: "RESULT boot pass a=1 a=2", wantErr: ErrMalformed},
		{line: "", wantErr: ErrMalformed},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, err := ParseResult(tc.line)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ParseResult(%q) err = %v, want %v", tc.line, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseResult(%q): %v", tc.line, err)
			}
			if got.Name != tc.name || got.Pass != tc.pass || got.Skip != tc.skip || strings.Join(got.Keys, ",") != tc.keys ||
				len(got.KV) != len(tc.kv) {
				t.Fatalf("ParseResult(%q) = %+v", tc.line, got)
			}
			for k, v := range tc.kv {
				if got.KV[k] != v {
					t.Errorf("%s = %q, want %q", k, got.KV[k], v)
				}
			}
		})
	}
}

func TestResultAccessors(t *testing.T) {
	r, err := ParseResult("RESULT net pass pps=12000 mask=0x10 bad=1x msg_hex=61206220 odd_hex=abc")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key     string
		want    int64
		wantErr error
	}{{"pps", 12000, nil}, {"mask", 16, nil}, {"bad", 0, ErrMalformed}, {"missing", 0, ErrNoKey}} {
		got, err := r.Int(tc.key)
		if !errors.Is(err, tc.wantErr) || got != tc.want {
			t.Errorf("Int(%s) = %d, %v; want %d, %v", tc.key, got, err, tc.want, tc.wantErr)
		}
	}
	if s, err := r.Text("msg"); err != nil || s != "a b " {
		t.Errorf("Text(msg) = %q, %v; want \"a b \"", s, err)
	}
	if _, err := r.Text("odd"); !errors.Is(err, ErrMalformed) {
		t.Errorf("Text(odd) err = %v, want ErrMalformed", err)
	}
	if _, err := r.Text("nope"); !errors.Is(err, ErrNoKey) {
		t.Errorf("Text(nope) err = %v, want ErrNoKey", err)
	}
}

func TestParseSummary(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Counts
		ok   bool
	}{
		{"SUMMARY pass=3 fail=1 skip=2", Counts{3, 1, 2}, true},
		{"SUMMARY skip=0 fail=0 pass=2\r", Counts{2, 0, 0}, true},
		{"noise SUMMARY pass=0 fail=0 skip=0", Counts{}, true},
		{"SUMMARY pass=3 fail=1", Counts{}, false}, // skip= is required
		{"SUMMARY pass=3", Counts{}, false},
		{"SUMMARY pass=3 pass=1 skip=0", Counts{}, false},
		{"SUMMARY pass=1 fail=0 fail=0", Counts{}, false},
		{"SUMMARY pass=-1 fail=0 skip=0", Counts{}, false},
		{"SUMMARY pass=x fail=0 skip=0", Counts{}, false},
		{"SUMMARY pass=1 fail=0 skip=", Counts{}, false},
		{"SUMMARY pass=1 fail=0 skipped=0", Counts{}, false},
		{"SUMMARY pass=1 fail=0 skip=0 extra=1", Counts{}, false},
		{"SUMMARY pass=99999999999999999999 fail=0 skip=0", Counts{}, false},
	} {
		c, err := ParseSummary(tc.line)
		if (err == nil) != tc.ok || c != tc.want {
			t.Errorf("ParseSummary(%q) = %+v, %v; want %+v ok=%v", tc.line, c, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseSummary(%q) err = %v, want ErrMalformed", tc.line, err)
		}
	}
}

func TestParse(t *testing.T) {
	serial := "noise\r\nRESULT cmdline pass len=4 hex=74657374\nxx RESULT irq fail timer=0 serial=3\n" +
		"RESULT blk-indirect skip reason=no_indirect\nSUMMARY pass=1 fail=1 skip=1\n"
	var o Output
	Parse(serial, &o)
	if !o.Summary || o.Passed != 1 || o.Failed != 1 || o.Skipped != 1 || len(o.Malformed) != 0 {
		t.Fatalf("summary: %+v", o)
	}
	c, ok := o.Results["cmdline"]
	if !ok || !c.Pass || c.KV["hex"] != "74657374" {
		t.Fatalf("cmdline result: %+v", c)
	}
	if n, err := c.Int("len"); err != nil || n != 4 {
		t.Fatalf("len = %d, %v", n, err)
	}
	irq := o.Results["irq"]
	if irq.Pass || irq.KV["serial"] != "3" {
		t.Fatalf("irq result: %+v", irq)
	}
	if sk := o.Results["blk-indirect"]; !sk.Skip || sk.Pass || sk.Verdict() != "skip" || irq.Verdict() != "fail" {
		t.Fatalf("skip result: %+v", sk)
	}
	if strings.Join(o.Order, ",") != "cmdline,irq,blk-indirect" || strings.Join(o.FailedNames(), ",") != "irq" {
		t.Fatalf("order %v, failed %v", o.Order, o.FailedNames())
	}
	// Parse resets what an earlier Parse found.
	Parse("RESULT z pass\n", &o)
	if o.Summary || o.Passed != 0 || o.Skipped != 0 || len(o.Results) != 1 || strings.Join(o.Order, ",") != "z" {
		t.Fatalf("second Parse kept old state: %+v", o)
	}
}

func TestParseCheck(t *testing.T) {
	for _, tc := range []struct {
		name      string
		serial    string
		wantErr   error
		malformed int
	}{
		{"clean", "qboot noise\r\nRESULT a pass\r\nRESULT b pass n=1\r\nSUMMARY pass=2 fail=0 skip=0\r\n", nil, 0},
		{"kernel log prefix", "[ 0.1] RESULT a pass\n[ 0.2] SUMMARY pass=1 fail=0 skip=0\n", nil, 0},
		{"failure", "RESULT a pass\nRESULT b fail\nSUMMARY pass=1 fail=1 skip=0\n", ErrGuestFailed, 0},
		{"skip", "RESULT a pass\nRESULT b skip reason=no_indirect\nSUMMARY pass=1 fail=0 skip=1\n", ErrUnexpectedSkip, 0},
		{"failure beats skip", "RESULT a fail\nRESULT b skip reason=x\nSUMMARY pass=0 fail=1 skip=1\n", ErrGuestFailed, 0},
		{"no summary", "RESULT a pass\n", ErrNoSummary, 0},
		{"empty", "", ErrNoSummary, 0},
		{"summary lies", "RESULT a fail\nSUMMARY pass=1 fail=0 skip=0\n", ErrSummaryMismatch, 0},
		{"summary hides a skip", "RESULT a pass\nRESULT b skip reason=x\nSUMMARY pass=2 fail=0 skip=0\n", ErrSummaryMismatch, 0},
		{"summary invents a skip", "RESULT a pass\nSUMMARY pass=1 fail=0 skip=1\n", ErrSummaryMismatch, 0},
		{"repeated name counts twice", "RESULT a pass\nRESULT a pass\nSUMMARY pass=1 fail=0 skip=0\n", ErrSummaryMismatch, 0},
		{"bad verdict", "RESULT a maybe\nSUMMARY pass=0 fail=0 skip=0\n", ErrMalformed, 1},
		{"skip without reason", "RESULT a skip\nSUMMARY pass=0 fail=0 skip=1\n", ErrMalformed, 1},
		{"bad word", "RESULT a pass x\nRESULT b pass\nSUMMARY pass=1 fail=0 skip=0\n", ErrMalformed, 1},
		{"bad summary", "RESULT a pass\nSUMMARY pass=1\n", ErrMalformed, 1},
		{"old summary", "RESULT a pass\nSUMMARY pass=1 fail=0\n", ErrMalformed, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o Output
			Parse(tc.serial, &o)
			if err := o.Check(); !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("Check() = %v, want %v", err, tc.wantErr)
			}
			if len(o.Malformed) != tc.malformed {
				t.Fatalf("Malformed = %+v, want %d lines", o.Malformed, tc.malformed)
			}
			for _, m := range o.Malformed {
				if !errors.Is(m.Err, ErrMalformed) || !strings.HasPrefix(m.Line, "RESULT ") && !strings.HasPrefix(m.Line, "SUMMARY ") {
					t.Errorf("bad line %+v", m)
				}
				if _, listed := o.Results[strings.Fields(m.Line)[1]]; listed && strings.HasPrefix(m.Line, "RESULT ") {
					t.Errorf("malformed line %q also in Results", m.Line)
				}
			}
		})
	}
}

func TestCheckSkips(t *testing.T) {
	var o Output
	Parse("RESULT a pass\nRESULT b skip reason=no_indirect\nRESULT c skip reason=no_flush\nSUMMARY pass=1 fail=0 skip=2\n", &o)
	for _, tc := range []struct {
		may     []string
		wantErr error
		msg     string
	}{
		{nil, ErrUnexpectedSkip, "b (reason=no_indirect), c (reason=no_flush)"},
		{[]string{"b"}, ErrUnexpectedSkip, "c (reason=no_flush)"},
		{[]string{"a", "c"}, ErrUnexpectedSkip, "b (reason=no_indirect)"},
		{[]string{"b", "c"}, nil, ""},
	} {
		err := o.CheckSkips(tc.may...)
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
			t.Errorf("CheckSkips(%v) = %v, want %v", tc.may, err, tc.wantErr)
			continue
		}
		if err != nil && !strings.HasSuffix(err.Error(), ": "+tc.msg) {
			t.Errorf("CheckSkips(%v) = %q, want it to end in %q", tc.may, err, tc.msg)
		}
	}
	if err := o.Check(); !errors.Is(err, ErrUnexpectedSkip) {
		t.Errorf("Check() = %v: Check allows no skip", err)
	}
}

// FuzzParse feeds arbitrary guest serial output to the parser: it must never
// panic, and what it reports must be internally consistent.
func FuzzParse(f *testing.F) {
	f.Add("RESULT a pass k=v x_hex=41\nSUMMARY pass=1 fail=0 skip=0\n")
	f.Add("RESULT a skip reason=r\nRESULT b skip\nSUMMARY skip=1 pass=0 fail=0\n")
	f.Add("RESULT  \x00 fail ==\r\nSUMMARY pass=99999999999999999999 fail=0")
	f.Add("junk RESULT a fail b=0x10\r\nRESULT a pass\nRESULT SUMMARY pass=1 fail=0\n")
	f.Fuzz(func(t *testing.T, serial string) {
		var o Output
		Parse(serial, &o)
		if len(o.Order) != len(o.Results) {
			t.Fatalf("Order %v vs %d results", o.Order, len(o.Results))
		}
		for _, n := range o.Order {
			r, ok := o.Results[n]
			if !ok || r.Name != n || n == "" || len(r.Keys) != len(r.KV) || (r.Pass && r.Skip) || (r.Skip && r.KV["reason"] == "") {
				t.Fatalf("inconsistent result %q: %+v", n, r)
			}
			for _, k := range r.Keys {
				_, _ = r.Int(k)
				_, _ = r.Text(strings.TrimSuffix(k, "_hex"))
			}
		}
		if o.Passed < 0 || o.Failed < 0 || o.Skipped < 0 || (!o.Summary && o.Passed+o.Failed+o.Skipped != 0) {
			t.Fatalf("summary %v pass=%d fail=%d skip=%d", o.Summary, o.Passed, o.Failed, o.Skipped)
		}
		for _, m := range o.Malformed {
			if !errors.Is(m.Err, ErrMalformed) {
				t.Fatalf("malformed entry %+v does not wrap ErrMalformed", m)
			}
		}
		if err := o.Check(); err == nil && (len(o.Malformed) > 0 || !o.Summary || o.Failed != 0 || o.Skipped != 0) {
			t.Fatalf("Check passed %+v", o)
		}
	})
}

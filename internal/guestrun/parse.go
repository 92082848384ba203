package guestrun

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Sentinel errors for the test kernel's output protocol. Callers match them with
// errors.Is.
var (
	// ErrMalformed marks a line that carries a RESULT or SUMMARY tag but does not
	// follow the protocol. The guest is untrusted, so such a line is reported
	// (Output.Malformed) rather than half-believed or silently dropped.
	ErrMalformed = errors.New("guestrun: malformed RESULT or SUMMARY line")
	// ErrNoKey means a RESULT line lacks the key asked for.
	ErrNoKey = errors.New("guestrun: RESULT has no such key")
	// ErrNoSummary means the guest never printed a SUMMARY line (crash or hang).
	ErrNoSummary = errors.New("guestrun: no SUMMARY line")
	// ErrSummaryMismatch means SUMMARY's counts disagree with the RESULT lines.
	ErrSummaryMismatch = errors.New("guestrun: SUMMARY disagrees with RESULT lines")
	// ErrGuestFailed means at least one RESULT line says fail.
	ErrGuestFailed = errors.New("guestrun: guest tests failed")
	// ErrUnexpectedSkip means a RESULT line says skip and the caller did not
	// allow that name to skip (guest/tests.cfg may_skip).
	ErrUnexpectedSkip = errors.New("guestrun: guest test skipped")
)

// Protocol tags. A tag may be preceded by other console output on the same line:
// a real kernel's log shares the console with the test kernel's reports.
const (
	resultTag  = "RESULT "
	summaryTag = "SUMMARY "
)

// Result is one "RESULT <name> pass|fail|skip key=value ..." line. Values never
// contain spaces; strings that might are hex-encoded under a key ending in "_hex".
// A skip line (the check could not run here) always has a non-empty reason=.
type Result struct {
	Name string
	Pass bool // the verdict is pass
	Skip bool // the verdict is skip; Pass and Skip both false means fail
	KV   map[string]string
	// Keys holds KV's keys in the order the guest printed them, for stable reports.
	Keys []string
}

// BadLine is a serial line that carried a RESULT or SUMMARY tag but did not parse.
type BadLine struct {
	Line string // the line, from its tag on
	Err  error  // wraps ErrMalformed and says what was wrong
}

// ParseResult parses one RESULT line; text before the tag is ignored. Every part
// comes from the guest, so every part is checked: a missing name or verdict, a
// verdict other than pass, fail or skip, a word without '=', an empty or
// duplicate key, a skip without a non-empty reason= are ErrMalformed.
func ParseResult(line string) (Result, error) {
	i := strings.Index(line, resultTag)
	if i < 0 {
		return Result{}, fmt.Errorf("%w: no %q tag: %q", ErrMalformed, resultTag, line)
	}
	f := strings.Fields(line[i+len(resultTag):])
	if len(f) < 2 {
		return Result{}, fmt.Errorf("%w: want \"RESULT name pass|fail|skip ...\": %q", ErrMalformed, line[i:])
	}
	r := Result{Name: f[0], KV: map[string]string{}}
	switch f[1] {
	case "pass":
		r.Pass = true
	case "fail":
	case "skip":
		r.Skip = true
	default:
		return Result{}, fmt.Errorf("%w: RESULT %s verdict %q is not pass, fail or skip", ErrMalformed, r.Name, f[1])
	}
	for _, kv := range f[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return Result{}, fmt.Errorf("%w: RESULT %s: %q is not key=value", ErrMalformed, r.Name, kv)
		}
		if _, dup := r.KV[k]; dup {
			return Result{}, fmt.Errorf("%w: RESULT %s: duplicate key %q", ErrMalformed, r.Name, k)
		}
		r.KV[k] = v
		r.Keys = append(r.Keys, k)
	}
	if r.Skip && r.KV["reason"] == "" {
		// A skip must say why, or it is a pass that hides what did not run.
		return Result{}, fmt.Errorf("%w: RESULT %s skip without reason=", ErrMalformed, r.Name)
	}
	return r, nil
}

// Verdict returns "pass", "fail" or "skip", as the guest printed it.
func (r Result) Verdict() string {
	switch {
	case r.Pass:
		return "pass"
	case r.Skip:
		return "skip"
	}
	return "fail"
}

// Int returns KV[key] as an integer (decimal, or 0x-prefixed hex).
func (r Result) Int(key string) (int64, error) {
	v, ok := r.KV[key]
	if !ok {
		return 0, fmt.Errorf("%w: RESULT %s has no %s", ErrNoKey, r.Name, key)
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: RESULT %s %s=%q: %v", ErrMalformed, r.Name, key, v, err)
	}
	return n, nil
}

// Text returns the decoded value of key+"_hex", the guest's encoding for strings
// that may contain spaces.
func (r Result) Text(key string) (string, error) {
	v, ok := r.KV[key+"_hex"]
	if !ok {
		return "", fmt.Errorf("%w: RESULT %s has no %s_hex", ErrNoKey, r.Name, key)
	}
	b, err := hex.DecodeString(v)
	if err != nil {
		return "", fmt.Errorf("%w: RESULT %s %s_hex: %v", ErrMalformed, r.Name, key, err)
	}
	return string(b), nil
}

// Counts are the three numbers of a SUMMARY line.
type Counts struct {
	Pass, Fail, Skip int
}

// ParseSummary parses "SUMMARY pass=N fail=M skip=K" (keys in any order, all
// three required, nothing else); text before the tag is ignored.
func ParseSummary(line string) (Counts, error) {
	i := strings.Index(line, summaryTag)
	if i < 0 {
		return Counts{}, fmt.Errorf("%w: no %q tag: %q", ErrMalformed, summaryTag, line)
	}
	f := strings.Fields(line[i+len(summaryTag):])
	if len(f) != 3 {
		return Counts{}, fmt.Errorf("%w: want \"SUMMARY pass=N fail=M skip=K\": %q", ErrMalformed, line[i:])
	}
	var c Counts
	fields := map[string]*int{"pass": &c.Pass, "fail": &c.Fail, "skip": &c.Skip}
	for _, kv := range f {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		dst, known := fields[k]
		if err != nil || n < 0 || !known {
			return Counts{}, fmt.Errorf("%w: SUMMARY field %q", ErrMalformed, kv)
		}
		*dst = n
		delete(fields, k) // a repeated key is then unknown
	}
	return c, nil
}

// Parse extracts RESULT and SUMMARY lines from serial output into o (Results,
// Order, Summary, Passed, Failed, Skipped, Malformed; other fields are left
// alone).
// Everything else on the console (firmware, kernel log) is ignored, including
// text before a tag on the same line. A repeated RESULT name keeps the last line
// (Order keeps the first position); a repeated SUMMARY keeps the last.
func Parse(serial string, o *Output) {
	o.Results = map[string]Result{}
	o.Order, o.Malformed = nil, nil
	o.Summary, o.Passed, o.Failed, o.Skipped = false, 0, 0, 0
	o.lines = Counts{}
	sc := bufio.NewScanner(strings.NewReader(serial))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		ri, si := strings.Index(line, resultTag), strings.Index(line, summaryTag)
		switch {
		case ri >= 0 && (si < 0 || ri < si):
			r, err := ParseResult(line[ri:])
			if err != nil {
				o.Malformed = append(o.Malformed, BadLine{Line: line[ri:], Err: err})
				continue
			}
			if _, seen := o.Results[r.Name]; !seen {
				o.Order = append(o.Order, r.Name)
			}
			o.Results[r.Name] = r
			switch {
			case r.Pass:
				o.lines.Pass++
			case r.Skip:
				o.lines.Skip++
			default:
				o.lines.Fail++
			}
		case si >= 0:
			c, err := ParseSummary(line[si:])
			if err != nil {
				o.Malformed = append(o.Malformed, BadLine{Line: line[si:], Err: err})
				continue
			}
			o.Summary, o.Passed, o.Failed, o.Skipped = true, c.Pass, c.Fail, c.Skip
		}
	}
	if err := sc.Err(); err != nil {
		// Only a line over 1 MiB gets here: the guest flooded the console.
		o.Malformed = append(o.Malformed, BadLine{Err: fmt.Errorf("%w: %v", ErrMalformed, err)})
	}
}

// FailedNames returns the names of the RESULT lines that say fail, in order.
func (o *Output) FailedNames() []string {
	var names []string
	for _, n := range o.Order {
		if r := o.Results[n]; !r.Pass && !r.Skip {
			names = append(names, n)
		}
	}
	return names
}

// UnexpectedSkips describes each RESULT line that says skip and whose name is
// not in allowed, as "name (reason=...)", in order.
func (o *Output) UnexpectedSkips(allowed ...string) []string {
	var out []string
	for _, n := range o.Order {
		if r := o.Results[n]; r.Skip && !slices.Contains(allowed, n) {
			out = append(out, fmt.Sprintf("%s (reason=%s)", n, r.KV["reason"]))
		}
	}
	return out
}

// Check says whether the guest's reports amount to a clean pass: no malformed
// lines, a SUMMARY line that agrees with the RESULT lines, no failures and no
// skips. It looks only at the serial protocol; exit status is the caller's
// business.
func (o *Output) Check() error {
	return o.CheckSkips()
}

// CheckSkips is Check that accepts skip lines for the RESULT names in
// mayskip (a tests.cfg entry's may_skip); any other skip is
// ErrUnexpectedSkip.
func (o *Output) CheckSkips(mayskip ...string) error {
	switch {
	case len(o.Malformed) > 0:
		return fmt.Errorf("%w (%d lines; first %q)", o.Malformed[0].Err, len(o.Malformed), o.Malformed[0].Line)
	case !o.Summary:
		return fmt.Errorf("%w (%d RESULT lines)", ErrNoSummary, len(o.Order))
	case o.Passed != o.lines.Pass || o.Failed != o.lines.Fail || o.Skipped != o.lines.Skip:
		return fmt.Errorf("%w: SUMMARY pass=%d fail=%d skip=%d, RESULT lines pass=%d fail=%d skip=%d",
			ErrSummaryMismatch, o.Passed, o.Failed, o.Skipped, o.lines.Pass, o.lines.Fail, o.lines.Skip)
	case o.Failed > 0:
		return fmt.Errorf("%w: %s", ErrGuestFailed, strings.Join(o.FailedNames(), ","))
	}
	if bad := o.UnexpectedSkips(mayskip...); len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrUnexpectedSkip, strings.Join(bad, ", "))
	}
	return nil
}

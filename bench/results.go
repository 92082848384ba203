package bench

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Result is one "RESULT <name> pass|fail key=value ..." line from the guest test
// kernel. Values never contain spaces; strings that might are hex-encoded under a
// key ending in "_hex".
type Result struct {
	Name   string
	Pass   bool
	Values map[string]string
	// Keys keeps the order the guest printed them in, for stable reports.
	Keys []string
}

// Summary is the closing "SUMMARY pass=N fail=M" line.
type Summary struct {
	Pass, Fail int
}

// Report is everything parsed from one guest run's serial output.
type Report struct {
	Results []Result
	// Summary is nil when the guest never printed one (it crashed or hung).
	Summary *Summary
}

// ParseResult parses one RESULT line. The line comes from the guest, so every part
// is checked: a missing name or verdict, a key without '=', an empty or duplicate
// key is ErrBadResult.
func ParseResult(line string) (Result, error) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "RESULT" {
		return Result{}, fmt.Errorf("%w: want \"RESULT name pass|fail ...\": %q", ErrBadResult, line)
	}
	r := Result{Name: f[1], Values: map[string]string{}}
	switch f[2] {
	case "pass":
		r.Pass = true
	case "fail":
	default:
		return Result{}, fmt.Errorf("%w: verdict %q is not pass or fail", ErrBadResult, f[2])
	}
	for _, kv := range f[3:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return Result{}, fmt.Errorf("%w: %q is not key=value", ErrBadResult, kv)
		}
		if _, dup := r.Values[k]; dup {
			return Result{}, fmt.Errorf("%w: duplicate key %q", ErrBadResult, k)
		}
		r.Values[k] = v
		r.Keys = append(r.Keys, k)
	}
	return r, nil
}

// Int returns the value of key as a base-10 (or 0x-prefixed hex) integer.
func (r Result) Int(key string) (int64, error) {
	v, ok := r.Values[key]
	if !ok {
		return 0, fmt.Errorf("%w: %s has no key %q", ErrBadResult, r.Name, key)
	}
	n, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %s=%q: %v", ErrBadResult, r.Name, key, v, err)
	}
	return n, nil
}

// Text returns the decoded value of key+"_hex" (the guest's encoding for strings
// that may contain spaces).
func (r Result) Text(key string) (string, error) {
	v, ok := r.Values[key+"_hex"]
	if !ok {
		return "", fmt.Errorf("%w: %s has no key %q", ErrBadResult, r.Name, key+"_hex")
	}
	b, err := hex.DecodeString(v)
	if err != nil {
		return "", fmt.Errorf("%w: %s %s_hex: %v", ErrBadResult, r.Name, key, err)
	}
	return string(b), nil
}

// ParseSummary parses "SUMMARY pass=N fail=M" (keys in either order, both required).
func ParseSummary(line string) (Summary, error) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "SUMMARY" {
		return Summary{}, fmt.Errorf("%w: want \"SUMMARY pass=N fail=M\": %q", ErrBadResult, line)
	}
	var s Summary
	seen := map[string]bool{}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || seen[k] {
			return Summary{}, fmt.Errorf("%w: summary field %q", ErrBadResult, kv)
		}
		seen[k] = true
		switch k {
		case "pass":
			s.Pass = n
		case "fail":
			s.Fail = n
		default:
			return Summary{}, fmt.Errorf("%w: summary field %q", ErrBadResult, kv)
		}
	}
	if !seen["pass"] || !seen["fail"] {
		return Summary{}, fmt.Errorf("%w: summary lacks pass or fail: %q", ErrBadResult, line)
	}
	return s, nil
}

// ParseOutput collects the RESULT and SUMMARY lines from serial output, ignoring
// everything else (firmware and kernel chatter). A malformed RESULT or SUMMARY line
// is an error: a guest that prints garbage there must not pass silently.
func ParseOutput(out string) (Report, error) {
	var rep Report
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "RESULT "):
			r, err := ParseResult(l)
			if err != nil {
				return rep, err
			}
			rep.Results = append(rep.Results, r)
		case strings.HasPrefix(l, "SUMMARY "):
			s, err := ParseSummary(l)
			if err != nil {
				return rep, err
			}
			rep.Summary = &s
		}
	}
	return rep, nil
}

// Failed returns the names of failing results, and an error if the run is not a
// clean pass: no summary, a summary that disagrees with the RESULT lines, or
// failures.
func (rep Report) Failed() ([]string, error) {
	var failed []string
	pass := 0
	for _, r := range rep.Results {
		if r.Pass {
			pass++
		} else {
			failed = append(failed, r.Name)
		}
	}
	switch {
	case rep.Summary == nil:
		return failed, fmt.Errorf("bench: guest printed no SUMMARY line (%d results)", len(rep.Results))
	case rep.Summary.Pass != pass || rep.Summary.Fail != len(failed):
		return failed, fmt.Errorf("bench: SUMMARY pass=%d fail=%d disagrees with RESULT lines (pass=%d fail=%d)",
			rep.Summary.Pass, rep.Summary.Fail, pass, len(failed))
	case len(failed) > 0:
		return failed, fmt.Errorf("bench: guest tests failed: %s", strings.Join(failed, ","))
	}
	return nil, nil
}

// Find returns the result called name.
func (rep Report) Find(name string) (Result, bool) {
	for _, r := range rep.Results {
		if r.Name == name {
			return r, true
		}
	}
	return Result{}, false
}

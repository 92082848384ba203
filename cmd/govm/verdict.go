package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/govm/govm/splat"
	"github.com/govm/govm/vmm"
)

// verdictVersion is bumped when a field changes meaning or goes away
// (adding a field does not bump it). Schema: docs/result.md.
const verdictVersion = 2

// verdict is the --result JSON.
type verdict struct {
	Version    int    `json:"version"`
	ExitReason string `json:"exit_reason"`
	Status     int    `json:"status"`
	Reason     string `json:"reason"`
	// GuestCode is the debug-exit value the guest wrote, null if none.
	GuestCode    *int                 `json:"guest_code"`
	Splats       []splat.Splat        `json:"splats"`
	SplatCounts  map[string]int       `json:"splat_counts"`
	FailOn       []string             `json:"fail_on"`
	PhasesMS     map[string]float64   `json:"phases_ms"`
	ConsoleBytes uint64               `json:"console_bytes"`
	Devices      []vmm.DeviceCounters `json:"devices"`
	Kernel       string               `json:"kernel"`
	Exec         *string              `json:"exec"`
}

// decide turns how the VM ended and what the console showed into govm's
// status and one-line reason. The first rule that applies wins:
//
//  1. a panic (console line or pvpanic): statusPanic;
//  2. a splat class named by --fail-on: statusSplat;
//  3. --exec and the guest ended without handing over a status: 1;
//  4. otherwise how the VM ended (timeout 124, debug-exit, reset 0, ...).
func (s *smoke) decide(res vmm.Result) verdict {
	v := verdict{
		Version:     verdictVersion,
		ExitReason:  string(res.Kind),
		Status:      res.Status,
		Reason:      res.Reason,
		Splats:      s.watch.Splats(),
		SplatCounts: map[string]int{},
		FailOn:      []string{},
		PhasesMS:    map[string]float64{},
	}
	if res.GuestCode >= 0 {
		gc := res.GuestCode
		v.GuestCode = &gc
	}
	if v.Splats == nil {
		v.Splats = []splat.Splat{}
	}
	for _, k := range splat.Kinds {
		if n := s.watch.Count(k); n > 0 {
			v.SplatCounts[string(k)] = n
		}
		if s.failOn[k] {
			v.FailOn = append(v.FailOn, string(k))
		}
	}
	for p, ms := range s.watch.Phases() {
		v.PhasesMS[string(p)] = ms
	}
	if !s.vmStart.IsZero() {
		v.PhasesMS["vm_start"] = msBetween(s.start, s.vmStart)
	}
	v.PhasesMS["exit"] = msBetween(s.start, time.Now())
	v.ConsoleBytes = s.watch.Bytes()
	if s.f.exec != "" {
		v.Exec = &s.f.exec
	}

	if p, ok := s.watch.First(splat.Panic); ok || res.Kind == vmm.ExitPanic {
		v.ExitReason, v.Status = string(vmm.ExitPanic), statusPanic
		switch {
		case ok && res.Kind == vmm.ExitPanic:
			v.Reason = fmt.Sprintf("guest kernel panic: %q (%s)", p.Line, res.Reason)
		case ok:
			v.Reason = fmt.Sprintf("guest kernel panic: %q", p.Line)
		default:
			v.Reason = res.Reason
		}
		return v
	}
	for _, sp := range v.Splats {
		if s.failOn[sp.Kind] {
			v.Status = statusSplat
			v.Reason = fmt.Sprintf("guest kernel %s splat (--fail-on): %q", sp.Kind, sp.Line)
			return v
		}
	}
	if s.f.exec != "" && res.Kind != vmm.ExitDebugExit && res.Kind != vmm.ExitTimeout && res.Kind != vmm.ExitSignal {
		v.Status = 1
		v.Reason = fmt.Sprintf("--exec: the guest ended (%s) without handing over the command's status", res.Reason)
	}
	return v
}

// splatSummary is one line naming the splats seen, or "".
func splatSummary(v verdict) string {
	if len(v.SplatCounts) == 0 {
		return ""
	}
	var parts []string
	for _, k := range splat.Kinds {
		n := v.SplatCounts[string(k)]
		if n == 0 {
			continue
		}
		first := ""
		for _, sp := range v.Splats {
			if sp.Kind == k {
				first = fmt.Sprintf(" %q", sp.Line)
				break
			}
		}
		parts = append(parts, fmt.Sprintf("%s x%d%s", k, n, first))
	}
	return "guest console splats: " + strings.Join(parts, ", ")
}

func (v verdict) marshal() ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("--result: %w", err)
	}
	return append(b, '\n'), nil
}

func msBetween(a, b time.Time) float64 {
	return float64(b.Sub(a).Microseconds()) / 1000
}

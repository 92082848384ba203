package main

import (
	"fmt"
	"strings"

	"github.com/govm/govm/vmm"
)

// diskUsage is --disk's syntax, for error lines.
const diskUsage = "--disk PATH[,ro][,serial=ID][,event-idx=off][,indirect=off]"

// parseDisk parses --disk PATH[,ro][,serial=ID][,FEATURE=on|off]...
func parseDisk(s string) (vmm.DiskConfig, error) {
	parts := strings.Split(s, ",")
	dc := vmm.DiskConfig{Path: parts[0]}
	if dc.Path == "" {
		return dc, fmt.Errorf("--disk %q: missing image path; use %s", s, diskUsage)
	}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		off, isSwitch, err := vmm.FeatureSwitch(false, k, v)
		switch {
		case isSwitch:
			if err != nil {
				return dc, fmt.Errorf("--disk %q: %w", s, err)
			}
			dc.Withhold |= off
		case p == "ro":
			dc.ReadOnly = true
		case p == "rw":
			dc.ReadOnly = false
		case strings.HasPrefix(p, "serial="):
			dc.Serial = strings.TrimPrefix(p, "serial=") // vmm.New checks its length
		default:
			return dc, fmt.Errorf("--disk %q: unknown option %q; use %s", s, p, diskUsage)
		}
	}
	return dc, nil
}

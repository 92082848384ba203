package main

import (
	"fmt"
	"strings"

	"github.com/govm/govm/vmm"
)

// parseDisk parses --disk PATH[,ro][,serial=ID].
func parseDisk(s string) (vmm.DiskConfig, error) {
	parts := strings.Split(s, ",")
	dc := vmm.DiskConfig{Path: parts[0]}
	if dc.Path == "" {
		return dc, fmt.Errorf("--disk %q: missing image path; use --disk PATH[,ro][,serial=ID]", s)
	}
	for _, p := range parts[1:] {
		switch {
		case p == "ro":
			dc.ReadOnly = true
		case p == "rw":
			dc.ReadOnly = false
		case strings.HasPrefix(p, "serial="):
			dc.Serial = strings.TrimPrefix(p, "serial=") // vmm.New checks its length
		default:
			return dc, fmt.Errorf("--disk %q: unknown option %q; use --disk PATH[,ro][,serial=ID]", s, p)
		}
	}
	return dc, nil
}

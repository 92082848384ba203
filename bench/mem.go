package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Mapping is one /proc/PID/smaps entry, reduced to what the memory report needs.
type Mapping struct {
	// SizeKB is the mapping's virtual size; RSSKB how much of it is resident.
	SizeKB, RSSKB int64
	// Anon is true for mappings with no backing file (heap, guest RAM, stacks).
	Anon bool
}

// ReadSmaps reads /proc/PID/smaps.
func ReadSmaps(pid int) ([]Mapping, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, fmt.Errorf("bench: read smaps of pid %d: %w", pid, err)
	}
	return parseSmaps(string(b))
}

// parseSmaps parses smaps text: a header line "start-end perms offset dev inode
// [path]" opens each mapping, followed by "Field: N kB" lines.
func parseSmaps(s string) ([]Mapping, error) {
	var maps []Mapping
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && len(f) >= 5 {
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || end < start {
				return nil, fmt.Errorf("bench: smaps header %q", l)
			}
			// inode 0 and no path, or a bracketed pseudo-path like [heap]:
			// anonymous memory.
			anon := f[4] == "0" && (len(f) == 5 || strings.HasPrefix(f[5], "["))
			maps = append(maps, Mapping{SizeKB: int64((end - start) / 1024), Anon: anon})
			continue
		}
		if f[0] == "Rss:" && len(f) == 3 && len(maps) > 0 {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("bench: smaps Rss %q: %w", l, err)
			}
			maps[len(maps)-1].RSSKB = n
		}
	}
	return maps, nil
}

// SplitRSS divides a VMM's resident memory into guest RAM and the VMM's own
// overhead. Guest RAM is found by shape, the same way for every VMM: anonymous
// mappings whose size is between ramKB and ramKB+ramKB/8 (QEMU pads its RAM block
// for alignment). Guest pages are touched lazily, so guestKB is what the guest has
// used so far, not its configured size; vmmKB = totalKB - guestKB is what the VMM
// costs by itself.
func SplitRSS(maps []Mapping, ramKB int64) (totalKB, guestKB, vmmKB int64) {
	for _, m := range maps {
		totalKB += m.RSSKB
		if m.Anon && m.SizeKB >= ramKB && m.SizeKB <= ramKB+ramKB/8 {
			guestKB += m.RSSKB
		}
	}
	return totalKB, guestKB, totalKB - guestKB
}

// ReadStatusKB returns a "kB" field (VmRSS, VmHWM, ...) from /proc/PID/status.
func ReadStatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, fmt.Errorf("bench: read status of pid %d: %w", pid, err)
	}
	return parseStatusKB(string(b), field)
}

func parseStatusKB(status, field string) (int64, error) {
	for _, l := range strings.Split(status, "\n") {
		name, rest, ok := strings.Cut(l, ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return -1, fmt.Errorf("bench: status field %s: unexpected %q", field, rest)
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return -1, fmt.Errorf("bench: status field %s not present", field)
}

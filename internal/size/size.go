// Package size parses the byte sizes users give govm (-m, test disk sizes).
package size

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse parses a byte size with an optional K, M, G or T suffix (powers
// of 1024, case-insensitive, optional trailing "B" or "iB"). A bare number
// is in MiB, like kvmtool's and QEMU's -m.
func Parse(s string) (uint64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	mult := uint64(1 << 20)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			mult, t = 1<<20, t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		case 'T':
			mult, t = 1<<40, t[:n-1]
		}
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil || t == "" {
		return 0, fmt.Errorf("size %q is not a number with an optional K/M/G/T suffix (e.g. 512M, 2G)", s)
	}
	if v == 0 {
		return 0, fmt.Errorf("size %q must be more than zero (e.g. 512M)", s)
	}
	if v > (^uint64(0))/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return v * mult, nil
}

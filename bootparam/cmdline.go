package bootparam

import (
	"fmt"
	"strings"
)

// CmdlineAddr is where govm places the kernel command line (team brief,
// guest memory layout); the zero page's cmd_line_ptr points here.
const CmdlineAddr = 0x20000

// BuildCmdline joins the VMM's default arguments and the user's with a
// space and checks the result against limit, the kernel's cmdline_size
// (SetupHeader.CmdlineLimit; 0 means DefaultCmdlineSz). The kernel reads
// the line as a C string and silently truncates at cmdline_size (boot.rst,
// "THE KERNEL COMMAND LINE"), so a NUL or an overlong line would boot a
// kernel with different arguments than the user asked for: both are errors.
// The returned string has no terminating NUL; the caller writes one.
func BuildCmdline(defaults, user string, limit uint32) (string, error) {
	if limit == 0 {
		limit = DefaultCmdlineSz
	}
	var parts []string
	for _, s := range []string{defaults, user} {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	line := strings.Join(parts, " ")
	if i := strings.IndexByte(line, 0); i >= 0 {
		return "", fmt.Errorf("%w: NUL byte at offset %d (the kernel would stop reading there)", ErrCmdline, i)
	}
	if uint64(len(line)) > uint64(limit) {
		return "", fmt.Errorf("%w: %d bytes, the kernel accepts at most %d (cmdline_size)", ErrCmdline, len(line), limit)
	}
	return line, nil
}

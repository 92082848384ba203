package alarm

import (
	"runtime"
	"strings"
)

// inPpoll says whether some goroutine is in unix.Ppoll, in a syscall.
func inPpoll() bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "[syscall") && strings.Contains(g, "unix.Ppoll") {
			return true
		}
	}
	return false
}

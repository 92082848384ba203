// Package splat recognises Linux kernel splats (panics, BUGs, oopses,
// warnings, sanitizer reports, lockdep, hung tasks, soft lockups and RCU
// stalls) and boot milestones in a guest's console output. It is a leaf
// package: the console bytes go in through Watcher (an io.Writer), the
// findings come out through callbacks and a snapshot, and it knows nothing
// of VMs.
package splat

import "strings"

// Kind is the class of a splat; the names are the words --fail-on takes.
type Kind string

// The classes, with the Linux code that prints their first line.
const (
	// Panic: kernel/panic.c panic(): "Kernel panic - not syncing: %s".
	Panic Kind = "panic"
	// Bug: "BUG: ..." from lib/bug.c, mm/ and kernel/sched/ (NULL
	// dereference, scheduling while atomic, sleeping in atomic context...).
	Bug Kind = "bug"
	// Oops: arch/x86/kernel/dumpstack.c __die_header(): "Oops: %s%s..."
	// since 6.9, "%s: %04lx [#%d]" before (e.g. "general protection
	// fault: 0000 [#1] SMP").
	Oops Kind = "oops"
	// Warn: kernel/panic.c __warn(): "WARNING: CPU: %d PID: %d at ...".
	Warn Kind = "warn"
	// KASAN: mm/kasan/report.c "BUG: KASAN: %s in %pS", and the
	// "KASAN: null-ptr-deref in range" hint of a general protection fault.
	KASAN Kind = "kasan"
	// UBSAN: lib/ubsan.c ubsan_prologue(): "UBSAN: %s in %s:%d:%d".
	UBSAN Kind = "ubsan"
	// Lockdep: kernel/locking/lockdep.c print_circular_bug_header()
	// "WARNING: possible circular locking dependency detected" and
	// print_deadlock_bug() "WARNING: possible recursive locking detected".
	Lockdep Kind = "lockdep"
	// Hung: kernel/hung_task.c check_hung_task(): "INFO: task %s:%d
	// blocked for more than %ld seconds.".
	Hung Kind = "hung"
	// SoftLockup: kernel/watchdog.c watchdog_timer_fn(): "watchdog: BUG:
	// soft lockup - CPU#%d stuck for %us! [%s:%d]" (pr_fmt "watchdog: ").
	SoftLockup Kind = "softlockup"
	// RCUStall: kernel/rcu/tree_stall.h: "rcu: INFO: %s detected stalls
	// on CPUs/tasks:", "... self-detected stall on CPU", and the
	// expedited variant "detected expedited stalls".
	RCUStall Kind = "rcu"
)

// Kinds lists every class, in the order --fail-on help shows them.
var Kinds = []Kind{Panic, Bug, Oops, Warn, KASAN, UBSAN, Lockdep, Hung, SoftLockup, RCUStall}

// ParseKind maps a --fail-on word to its Kind; "warning" and "lockup" are
// accepted as aliases of warn and softlockup.
func ParseKind(s string) (Kind, bool) {
	switch s {
	case "warning":
		return Warn, true
	case "lockup", "soft-lockup":
		return SoftLockup, true
	case "rcu-stall", "stall":
		return RCUStall, true
	}
	for _, k := range Kinds {
		if string(k) == s {
			return k, true
		}
	}
	return "", false
}

// StripPrefix removes what printk puts before the message: the optional
// timestamp "[    1.234567]" (CONFIG_PRINTK_TIME) and the optional caller
// id "[    T1]" or "[    C0]" (CONFIG_PRINTK_CALLER), in either
// combination, and the space after them.
func StripPrefix(line string) string {
	for range 2 {
		rest, ok := cutBracket(strings.TrimPrefix(line, " "))
		if !ok {
			break
		}
		line = rest
	}
	return strings.TrimPrefix(line, " ")
}

// cutBracket removes one leading "[ ...]" whose content is a timestamp
// (digits with one dot) or a caller id (T or C then digits), padded with
// spaces on the left as printk pads them.
func cutBracket(s string) (string, bool) {
	if len(s) < 3 || s[0] != '[' {
		return s, false
	}
	end := strings.IndexByte(s, ']')
	// 32 bytes is far more than printk's widest field ("[12345678.123456]").
	if end < 2 || end > 32 {
		return s, false
	}
	body := strings.TrimLeft(s[1:end], " ")
	if !isTimestamp(body) && !isCaller(body) {
		return s, false
	}
	return s[end+1:], true
}

func isTimestamp(s string) bool {
	dot, digits := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			dot++
		case c >= '0' && c <= '9':
			digits++
		default:
			return false
		}
	}
	return dot == 1 && digits >= 2
}

func isCaller(s string) bool {
	if len(s) < 2 || (s[0] != 'T' && s[0] != 'C') {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Classify says which splat, if any, a console line starts. line is one
// line without its line ending; the printk prefix may still be on it.
// Only a splat's first line is recognised: the lines that follow (stack
// traces, register dumps) are not splats of their own.
func Classify(line string) (Kind, bool) {
	msg := StripPrefix(line)
	switch {
	case strings.HasPrefix(msg, "Kernel panic - not syncing"):
		return Panic, true
	// Before "BUG:": the soft-lockup line and KASAN reports also start
	// with (or contain) BUG:.
	case strings.HasPrefix(msg, "watchdog: BUG: soft lockup"):
		return SoftLockup, true
	case strings.HasPrefix(msg, "BUG: KASAN:"), strings.HasPrefix(msg, "KASAN:"):
		return KASAN, true
	case strings.HasPrefix(msg, "BUG:"):
		return Bug, true
	case strings.HasPrefix(msg, "Oops:"), isDieHeader(msg):
		return Oops, true
	case strings.HasPrefix(msg, "WARNING: CPU:"):
		return Warn, true
	case strings.HasPrefix(msg, "UBSAN:"):
		return UBSAN, true
	case strings.HasPrefix(msg, "WARNING: possible circular locking dependency"),
		strings.HasPrefix(msg, "WARNING: possible recursive locking detected"),
		// Lockdep before v4.12 printed an INFO banner instead.
		strings.HasPrefix(msg, "[ INFO: possible circular locking dependency"):
		return Lockdep, true
	case strings.HasPrefix(msg, "INFO: task ") && strings.Contains(msg, " blocked for more than "):
		return Hung, true
	case isRCUStall(msg):
		return RCUStall, true
	}
	return "", false
}

// isDieHeader matches the pre-6.9 x86 die header "<what>: %04lx [#%d]",
// e.g. "general protection fault: 0000 [#1] PREEMPT SMP" or "invalid
// opcode: 0000 [#1] SMP".
func isDieHeader(msg string) bool {
	i := strings.Index(msg, ": ")
	if i <= 0 || len(msg) < i+2+4+4 {
		return false
	}
	code := msg[i+2 : i+6]
	for j := 0; j < 4; j++ {
		c := code[j]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	rest, ok := strings.CutPrefix(msg[i+6:], " [#")
	if !ok {
		return false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	return n > 0 && n < len(rest) && rest[n] == ']'
}

// isRCUStall matches "rcu: INFO: rcu_sched detected stalls on CPUs/tasks:",
// "rcu: INFO: rcu_preempt self-detected stall on CPU", the expedited
// variant, and the same lines without the "rcu: " pr_fmt of older kernels.
func isRCUStall(msg string) bool {
	msg = strings.TrimPrefix(msg, "rcu: ")
	if !strings.HasPrefix(msg, "INFO: rcu") {
		return false
	}
	return strings.Contains(msg, "detected stall") || strings.Contains(msg, "detected expedited stall")
}

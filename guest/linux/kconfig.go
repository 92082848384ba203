// Package linuxguest holds what a Linux kernel needs to run under govm:
// the Kconfig fragment (govm.config) that `govm kconfig` merges into a
// kernel tree's .config and scripts/linux.sh builds the default guest with,
// and the guest-side patch for emulation-only hosts (pvm-syscall.patch).
// The default guest's own choices (minimal.config), its /init and the L3
// suite live beside them.
package linuxguest

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"
)

// Fragment is govm.config: the options every kernel booted under govm
// needs, one per line ("CONFIG_X=y" or "# CONFIG_X is not set"), with
// comments giving the reasons.
//
//go:embed govm.config
var Fragment string

// SyscallPatch is the patch a Linux guest needs on an emulation-only host,
// where user-mode SYSCALL faults at entry_SYSCALL_64 (the patch's comment
// says why); it applies to Linux 6.1 with `patch -p1`.
//
//go:embed pvm-syscall.patch
var SyscallPatch string

// Option is one line of a fragment: Name (CONFIG_X) is set to Value ("y",
// "m", a number or a quoted string), or, with Value "", not set.
type Option struct {
	Name, Value string
}

// Line is the option as .config spells it.
func (o Option) Line() string {
	if o.Value == "" {
		return "# " + o.Name + " is not set"
	}
	return o.Name + "=" + o.Value
}

// Options parses a fragment or a .config: its option lines, in order;
// other comments and blank lines are skipped.
func Options(text string) []Option {
	var out []Option
	for _, l := range strings.Split(text, "\n") {
		if o, ok := parseLine(strings.TrimSpace(l)); ok {
			out = append(out, o)
		}
	}
	return out
}

func parseLine(l string) (Option, bool) {
	if rest, ok := strings.CutPrefix(l, "# "); ok {
		name, found := strings.CutSuffix(rest, " is not set")
		if found && strings.HasPrefix(name, "CONFIG_") && !strings.ContainsAny(name, " =") {
			return Option{Name: name}, true
		}
		return Option{}, false
	}
	name, value, ok := strings.Cut(l, "=")
	if !ok || !strings.HasPrefix(name, "CONFIG_") || strings.ContainsAny(name, " #") || value == "" {
		return Option{}, false
	}
	return Option{Name: name, Value: value}, true
}

// Merge returns config with every option of frag set as frag says: each
// option's old line goes, and frag's lines are appended, under a comment
// naming govm. `make olddefconfig` then resolves what they select.
func Merge(config []byte, frag []Option) []byte {
	want := map[string]bool{}
	for _, o := range frag {
		want[o.Name] = true
	}
	var out bytes.Buffer
	for _, l := range strings.SplitAfter(string(config), "\n") {
		if o, ok := parseLine(strings.TrimSpace(l)); ok && want[o.Name] {
			continue
		}
		out.WriteString(l)
	}
	if out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
		out.WriteByte('\n')
	}
	out.WriteString("# govm kconfig: what a kernel needs under govm\n")
	for _, o := range frag {
		out.WriteString(o.Line())
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// Missing returns frag's options that config does not hold, each as
// "CONFIG_X=y (is n)": after olddefconfig, those whose dependencies the
// tree lacks. An option frag turns off holds when config has no line for
// it (its own dependencies are off).
func Missing(config []byte, frag []Option) []string {
	have := map[string]string{}
	for _, o := range Options(string(config)) {
		have[o.Name] = o.Value
	}
	var out []string
	for _, o := range frag {
		got, listed := have[o.Name]
		switch {
		case o.Value == "" && got != "":
			out = append(out, fmt.Sprintf("%s (is %s)", o.Line(), got))
		case o.Value != "" && got != o.Value:
			if !listed || got == "" {
				got = "n"
			}
			out = append(out, fmt.Sprintf("%s (is %s)", o.Line(), got))
		}
	}
	return out
}

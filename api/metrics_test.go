package api

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/govm/govm/virtio/qstats"
)

// parseSample parses one sample line of the Prometheus text format
// (name{label="value",...} number) as the format defines it: label values
// in double quotes with only \\, \" and \n escaped, valid UTF-8.
func parseSample(line string) (name string, labels map[string]string, err error) {
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return "", nil, fmt.Errorf("no metric name")
	}
	name, rest := line[:i], line[i:]
	labels = map[string]string{}
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq <= 0 {
				return "", nil, fmt.Errorf("label without =\": %q", rest)
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var v strings.Builder
			for {
				if rest == "" {
					return "", nil, fmt.Errorf("unterminated value of %s", key)
				}
				c := rest[0]
				rest = rest[1:]
				if c == '"' {
					break
				}
				if c == '\n' {
					return "", nil, fmt.Errorf("raw line feed in %s", key)
				}
				if c == '\\' {
					if rest == "" {
						return "", nil, fmt.Errorf("dangling backslash in %s", key)
					}
					switch rest[0] {
					case '\\':
						v.WriteByte('\\')
					case '"':
						v.WriteByte('"')
					case 'n':
						v.WriteByte('\n')
					default:
						return "", nil, fmt.Errorf("escape \\%c in %s is not in the format", rest[0], key)
					}
					rest = rest[1:]
					continue
				}
				v.WriteByte(c)
			}
			if !utf8.ValidString(v.String()) {
				return "", nil, fmt.Errorf("label %s is not UTF-8", key)
			}
			labels[key] = v.String()
			rest = strings.TrimPrefix(rest, ",")
		}
	}
	if !strings.HasPrefix(rest, " ") {
		return "", nil, fmt.Errorf("no value")
	}
	return name, labels, nil
}

// checkExposition fails for any line of out that the text format rejects,
// and returns the label values seen under key.
func checkExposition(t *testing.T, out string, key string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if strings.HasPrefix(l, "# ") {
			continue
		}
		_, labels, err := parseSample(l)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if v, ok := labels[key]; ok {
			seen[v] = true
		}
	}
	return seen
}

// TestMetricsLabelEscaping: names with quotes, backslashes, line feeds,
// control bytes, invalid UTF-8 and non-ASCII letters come out as the text
// format spells them (Go's %q wrote \x01 and \xff, which it has not).
func TestMetricsLabelEscaping(t *testing.T) {
	names := []string{`disk 0 (/tmp/a"b\c.img)`, "disk 1 (/tmp/line\nfeed)", "disk 2 (\x01ctl)", "disk 3 (\xffbad)", "disk 4 (héllo ✓)"}
	var s Stats
	s.Name = "vm \"x\""
	for i, n := range names {
		s.Queues = append(s.Queues, QueueStats{Device: n, Queue: qstats.Queue{Index: i, Name: "requests"}})
		s.Devices = append(s.Devices, DeviceStats{Device: n})
	}
	var out bytes.Buffer
	WriteMetrics(&out, s)
	seen := checkExposition(t, out.String(), "device")
	for _, n := range names {
		if want := strings.ToValidUTF8(n, "\uFFFD"); !seen[want] {
			t.Errorf("device %q did not come back as %q; seen %v", n, want, seen)
		}
	}
	if strings.Contains(out.String(), `\x`) || strings.Contains(out.String(), `\u`) {
		t.Errorf("Go escapes in the exposition:\n%s", out.String())
	}
}

// FuzzMetricsLabels: any VM, device or queue name gives an exposition the
// text format accepts (and WriteMetrics does not panic).
func FuzzMetricsLabels(f *testing.F) {
	f.Add("vm", "disk 0 (/tmp/d.img)", "requests", "io_out")
	f.Add(`a"b`, "\xff\x00", "\n", `\`)
	f.Fuzz(func(t *testing.T, vm, dev, queue, reason string) {
		s := Stats{Name: vm,
			Queues:  []QueueStats{{Device: dev, Queue: qstats.Queue{Name: queue, Drops: map[string]uint64{reason: 1}}}},
			Devices: []DeviceStats{{Device: dev}},
			VCPUs:   []VCPUStats{{Exits: map[string]uint64{reason: 2}}}}
		var out bytes.Buffer
		WriteMetrics(&out, s)
		checkExposition(t, out.String(), "device")
	})
}

// Package ringsim counts the cache lines a virtqueue moves between the
// driver's CPU and the device's CPU: the simulator Rusty Russell and Avi
// Kivity wished for on the 2010 EVENT_IDX thread, driven by govm's own
// queue code on the device side and by Linux's virtio_ring.c (as mirrored
// in virtio/vring) on the driver side. docs/ringsim.md explains the model.
package ringsim

import "sort"

// Agent is one side of the ring, each on its own CPU.
type Agent int

// The two agents.
const (
	Driver Agent = iota
	Device
)

func (a Agent) String() string {
	if a == Device {
		return "device"
	}
	return "driver"
}

// Cache is two private caches over one memory, at a fixed line size. A
// line is valid in either, both (shared) or neither. An access moves a
// line between the CPUs, a transfer, when:
//   - an agent reads a line it does not hold while the other does: the
//     other wrote it since this agent last had it (in this two-agent
//     model a copy is only ever lost to the other side's write);
//   - an agent writes a line the other holds: the other's copy is
//     invalidated (an ownership request, counted as one transfer even
//     when the writer already had a shared copy).
//
// A line neither holds (the first touch) is a cold miss, not a transfer.
type Cache struct {
	Line  uint64
	lines map[uint64]*line

	fields []Field
	// ownLine names fields that are given a line of their own, as if the
	// layout put them there (see Scenario.OwnLineEvents).
	ownLine map[string]bool

	counts  map[string]*[2]uint64 // transfers by field, by causing agent
	cold    uint64
	trace   []Event
	tracing bool
}

type line struct{ valid [2]bool }

// Field names a range of guest memory, so transfers can be reported by
// what they moved.
type Field struct {
	Name       string
	Start, End uint64
}

// Event is one access that moved a line, for the access sequences in the
// docs and in test failures.
type Event struct {
	Agent Agent
	Field string
	Line  uint64
	Write bool
}

// NewCache returns a cache model at the given line size over the fields.
func NewCache(lineSize uint64, fields []Field) *Cache {
	fs := append([]Field(nil), fields...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Start < fs[j].Start })
	return &Cache{Line: lineSize, lines: map[uint64]*line{}, fields: fs,
		ownLine: map[string]bool{}, counts: map[string]*[2]uint64{}}
}

func (c *Cache) field(gpa uint64) string {
	i := sort.Search(len(c.fields), func(i int) bool { return c.fields[i].End > gpa })
	if i < len(c.fields) && c.fields[i].Start <= gpa {
		return c.fields[i].Name
	}
	return "other"
}

// Access records one access of n bytes at gpa by agent a.
func (c *Cache) Access(a Agent, gpa, n uint64, write bool) {
	if n == 0 {
		return
	}
	name := c.field(gpa)
	first, last := gpa/c.Line, (gpa+n-1)/c.Line
	if c.ownLine[name] {
		// The field alone on a line: key it apart from every real line.
		first = 1<<62 | gpa/c.Line
		last = first
	}
	for k := first; k <= last; k++ {
		l := c.lines[k]
		if l == nil {
			l = &line{}
			c.lines[k] = l
		}
		o := 1 - a
		moved := false
		switch {
		case write:
			moved = l.valid[o]
			l.valid[o] = false
		case !l.valid[a] && l.valid[o]:
			moved = true
		case !l.valid[a]:
			c.cold++
		}
		l.valid[a] = true
		if !moved {
			continue
		}
		cnt := c.counts[name]
		if cnt == nil {
			cnt = new([2]uint64)
			c.counts[name] = cnt
		}
		cnt[a]++
		if c.tracing {
			c.trace = append(c.trace, Event{Agent: a, Field: name, Line: k, Write: write})
		}
	}
}

// Reset forgets the counts (not the lines' state), to measure a steady
// state after a warm-up.
func (c *Cache) Reset() {
	c.counts = map[string]*[2]uint64{}
	c.cold = 0
	c.trace = nil
}

// Trace starts (or stops) recording the transfers as Events.
func (c *Cache) Trace(on bool) { c.tracing = on }

// Events returns the transfers recorded since Trace(true) or Reset.
func (c *Cache) Events() []Event { return c.trace }

// Counts returns the transfers by field and causing agent.
func (c *Cache) Counts() map[string][2]uint64 {
	m := make(map[string][2]uint64, len(c.counts))
	for k, v := range c.counts {
		m[k] = *v
	}
	return m
}

// observer adapts one agent's accesses to guestmem.Observer.
type observer struct {
	c *Cache
	a Agent
}

func (o observer) Access(gpa, n uint64, write bool) { o.c.Access(o.a, gpa, n, write) }

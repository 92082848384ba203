package ringsim

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/govm/govm/virtio/vring"
)

// QueueSize is the ring size of every scenario in the table: virtio-net's
// legacy size in govm (virtio-blk's is 128).
const QueueSize = 256

// base is the scenario every row of the table varies: a chain of two
// buffers (a request and its status, a header and a frame), one buffer per
// round, EVENT_IDX, an interrupt-driven driver, in-order completion.
func base(layout Layout, line uint64) Scenario {
	return Scenario{Layout: layout, Line: line, Size: QueueSize, InFlight: 1, Batch: 1,
		Chain: 2, EventIdx: true}
}

// Curve is one line of the plot: a layout's cost against fullness.
type Curve struct {
	Label  string
	Points []Result
}

// Fullness is a scenario's share of the ring's descriptors in flight.
func (s Scenario) Fullness() float64 {
	return float64(s.InFlight*s.descsPerChain()) / float64(s.Size)
}

// Curves sweeps ring fullness for each layout, direct and indirect, with
// an interrupt-driven and a polling driver.
func Curves(line uint64) ([]Curve, error) {
	var cs []Curve
	for _, poll := range []bool{false, true} {
		for _, l := range []Layout{Split, Packed} {
			for _, ind := range []bool{false, true} {
				s := base(l, line)
				s.Indirect, s.Poll = ind, poll
				c := Curve{Label: string(l)}
				if ind {
					c.Label += " indirect"
				}
				if poll {
					c.Label += ", polling driver"
				} else {
					c.Label += ", interrupt-driven driver"
				}
				capacity := int(s.Size) / s.descsPerChain()
				for _, f := range []int{1, 2, 4, 8, 16, 32, 64, 96, 128, 160, 192, 224, 255} {
					if f > capacity-1 {
						f = capacity - 1
					}
					if n := len(c.Points); n > 0 && c.Points[n-1].Scenario.InFlight >= f {
						continue
					}
					s.InFlight = f
					r, err := Run(s)
					if err != nil {
						return nil, err
					}
					c.Points = append(c.Points, r)
				}
				cs = append(cs, c)
			}
		}
	}
	return cs, nil
}

// Scenarios are the table's rows besides the fullness sweep: each varies
// one thing the thread argued about.
func Scenarios(line uint64) []Scenario {
	var ss []Scenario
	for _, l := range []Layout{Split, Packed} {
		b := base(l, line)
		half := b
		half.InFlight = 64 // half the ring's descriptors, in chains of two
		with := func(s Scenario, f func(*Scenario)) Scenario { f(&s); return s }
		ss = append(ss,
			b, // nearly empty
			with(b, func(s *Scenario) { s.Indirect = true }),
			with(b, func(s *Scenario) { s.EventIdx = false }),
			with(b, func(s *Scenario) { s.Chain = 1 }),
			with(b, func(s *Scenario) { s.Chain = 4 }),
			with(b, func(s *Scenario) { s.Chain = 8 }),
			with(b, func(s *Scenario) { s.Chain, s.Indirect = 8, true }),
			half,
			with(half, func(s *Scenario) { s.Indirect = true }),
			with(half, func(s *Scenario) { s.Poll = true }),
			with(half, func(s *Scenario) { s.Poll, s.Indirect = true, true }),
			with(half, func(s *Scenario) { s.Batch = 8 }),
			with(half, func(s *Scenario) { s.Batch = 32 }),
			with(half, func(s *Scenario) { s.Poll, s.OutOfOrder = true, true }),
			with(half, func(s *Scenario) { s.Poll, s.OutOfOrder, s.Reuse = true, true, vring.FIFO }),
			with(half, func(s *Scenario) { s.Poll, s.Reuse = true, vring.FIFO }),
			with(half, func(s *Scenario) { s.EventIdx = false }),
		)
		if l == Split {
			ss = append(ss,
				with(b, func(s *Scenario) { s.OwnLineEvents = true }),
				with(half, func(s *Scenario) { s.OwnLineEvents = true }),
				with(half, func(s *Scenario) { s.Poll, s.OwnLineEvents = true, true }))
		}
	}
	return ss
}

// RunAll runs scenarios in order.
func RunAll(ss []Scenario) ([]Result, error) {
	rs := make([]Result, 0, len(ss))
	for _, s := range ss {
		r, err := Run(s)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// WriteTable prints one row per result: transfers per buffer by the side
// that caused them, and notifications per buffer.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "scenario\tfullness\tdriver\tdevice\ttotal\tkicks\tinterrupts\t\n")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%.0f%%\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", r.Scenario.Name(),
			100*r.Scenario.Fullness(), r.Driver, r.Device, r.Total, r.Kicks, r.Interrupts)
	}
	return tw.Flush()
}

// jsonResult is a Result as --json prints it.
type jsonResult struct {
	Scenario   string                `json:"scenario"`
	Layout     Layout                `json:"layout"`
	Line       uint64                `json:"line"`
	Size       uint16                `json:"size"`
	InFlight   int                   `json:"in_flight"`
	Batch      int                   `json:"batch"`
	Chain      int                   `json:"chain"`
	Indirect   bool                  `json:"indirect"`
	EventIdx   bool                  `json:"event_idx"`
	Poll       bool                  `json:"poll"`
	OutOfOrder bool                  `json:"out_of_order"`
	Reuse      string                `json:"reuse"`
	OwnLine    bool                  `json:"own_line_events"`
	Buffers    int                   `json:"buffers"`
	Driver     float64               `json:"driver"`
	Device     float64               `json:"device"`
	Total      float64               `json:"total"`
	Kicks      float64               `json:"kicks"`
	Interrupts float64               `json:"interrupts"`
	ByField    map[string][2]float64 `json:"by_field"`
}

// WriteJSON prints the results as a JSON array, with the per-field split.
func WriteJSON(w io.Writer, rs []Result) error {
	out := make([]jsonResult, len(rs))
	for i, r := range rs {
		s := r.Scenario
		out[i] = jsonResult{Scenario: s.Name(), Layout: s.Layout, Line: s.Line, Size: s.Size,
			InFlight: s.InFlight, Batch: s.Batch, Chain: s.Chain, Indirect: s.Indirect,
			EventIdx: s.EventIdx, Poll: s.Poll, OutOfOrder: s.OutOfOrder, Reuse: s.Reuse.String(),
			OwnLine: s.OwnLineEvents, Buffers: r.Buffers, Driver: r.Driver, Device: r.Device,
			Total: r.Total, Kicks: r.Kicks, Interrupts: r.Interrupts, ByField: r.ByField}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

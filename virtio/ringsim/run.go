package ringsim

import (
	"fmt"
	"math/rand"
	"sort"

	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/vring"
)

// Result is what one scenario costs, per buffer (per chain) completed.
type Result struct {
	Scenario Scenario
	Buffers  int // chains completed while measuring
	// Driver and Device are the transfers each side caused, Total both.
	Driver, Device, Total float64
	// ByField splits them by what moved: field name -> [driver, device].
	ByField map[string][2]float64
	// Kicks and Interrupts are the notifications each side sent.
	Kicks, Interrupts float64
}

// DriverSide is the driver side, split or packed (virtio/vring).
type DriverSide interface {
	Add(vring.Buf) (uint16, bool)
	KickPrepare() bool
	GetBuf() (uint16, uint32, bool)
	Interrupt() bool
	DisableCB()
	EnableCBPrepare() uint16
	Poll(uint16) bool
}

// Memory map of the simulated guest: rings from ringBase, indirect tables
// and the (never observed) data area above.
const (
	ramSize    = 1 << 20
	ringBase   = 0x1000
	tablesBase = 0x40000
	tablesSize = 0x40000
	dataBase   = 0x80000
)

type rig struct {
	s      Scenario
	cache  *Cache
	drv    DriverSide
	dev    virtio.Steps
	devMem *guestmem.Memory
	rng    *rand.Rand

	availLag, hold, usedLag int

	added, popped, reaped int
	held                  []uint16
	elems                 []virtio.UsedElem
	asleep                bool
	armed                 bool // kicks asked for: the Loop's armed
	kicks, irqs           int
}

// Pair is a driver and a device on one ring in unobserved memory, for the
// ring benchmark, which runs them on two CPUs.
type Pair struct {
	Driver    DriverSide
	Device    virtio.Steps
	DeviceMem *guestmem.Memory
}

// NewPair builds s's ring without a cache model.
func NewPair(s Scenario) (*Pair, error) {
	mem, err := memoryFor(s)
	if err != nil {
		return nil, err
	}
	_, dev, mkDriver := layoutRing(s)
	return &Pair{Driver: mkDriver(mem), Device: dev, DeviceMem: mem}, nil
}

// layoutRing lays s's ring out: its fields, its device side, and how to
// make its driver side over a view of the memory.
func layoutRing(s Scenario) ([]Field, virtio.Steps, func(*guestmem.Memory) DriverSide) {
	cfg := vring.Config{Num: s.Size, EventIdx: s.EventIdx, Indirect: s.Indirect, Reuse: s.Reuse,
		Data: dataBase, Tables: vring.NewTables(tablesBase, tablesSize)}
	var features uint64
	if s.EventIdx {
		features |= virtio.Bit(virtio.FeatureRingEventIdx)
	}
	if s.Indirect {
		features |= virtio.Bit(virtio.FeatureRingIndirectDesc)
	}
	if s.Layout == Packed {
		return packedRing(s, cfg, features)
	}
	return splitRing(s, cfg, features)
}

// memoryFor validates s and returns a fresh guest memory for its ring.
func memoryFor(s Scenario) (*guestmem.Memory, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return guestmem.New(guestmem.Region{GPA: 0, Host: make([]byte, ramSize)})
}

func newRig(s Scenario) (*rig, error) {
	mem, err := memoryFor(s)
	if err != nil {
		return nil, err
	}
	r := &rig{s: s, rng: rand.New(rand.NewSource(s.Seed)), armed: true}
	r.availLag, r.hold, r.usedLag = s.lags()
	tables := Field{"indirect tables", tablesBase, tablesBase + tablesSize}
	fields, dev, mkDriver := layoutRing(s)
	r.dev = dev
	r.cache = NewCache(s.Line, append(fields, tables))
	if s.OwnLineEvents {
		r.cache.ownLine["used_event"] = true
		r.cache.ownLine["avail_event"] = true
	}
	r.devMem = mem.Observed(observer{r.cache, Device})
	r.drv = mkDriver(mem.Observed(observer{r.cache, Driver}))
	if s.Poll {
		r.drv.DisableCB()
	}
	return r, nil
}

// splitRing lays out a legacy split ring at ringBase (spec 2.7.2).
func splitRing(s Scenario, cfg vring.Config, features uint64) ([]Field, virtio.Steps, func(*guestmem.Memory) DriverSide) {
	desc, avail, used := virtio.LegacyRingAddrs(ringBase/virtio.LegacyAlign, s.Size)
	n := uint64(s.Size)
	fields := []Field{
		{"descriptor table", desc, desc + 16*n},
		{"avail flags", avail, avail + 2},
		{"avail idx", avail + 2, avail + 4},
		{"avail ring", avail + 4, avail + 4 + 2*n},
		{"used_event", avail + 4 + 2*n, avail + 6 + 2*n},
		{"used flags", used, used + 2},
		{"used idx", used + 2, used + 4},
		{"used ring", used + 4, used + 4 + 8*n},
		{"avail_event", used + 4 + 8*n, used + 6 + 8*n},
	}
	q := virtio.NewQueue(s.Size)
	q.DescAddr, q.AvailAddr, q.UsedAddr, q.Ready = desc, avail, used, true
	q.SetFeatures(features)
	return fields, virtio.SplitSteps(q), func(m *guestmem.Memory) DriverSide {
		return vring.NewSplit(m, cfg, desc, avail, used)
	}
}

// Run measures one scenario: a warm-up that takes every position of the
// ring through several wraps, then as many rounds again, counted.
func Run(s Scenario) (Result, error) {
	r, err := newRig(s)
	if err != nil {
		return Result{}, err
	}
	rounds := 4*int(s.Size)/s.Batch + 64
	for i := 0; i < rounds; i++ {
		if err := r.round(); err != nil {
			return Result{}, fmt.Errorf("%s: warm-up round %d: %w", s.Name(), i, err)
		}
	}
	r.cache.Reset()
	r.kicks, r.irqs = 0, 0
	start := r.reaped
	for i := 0; i < rounds; i++ {
		if err := r.round(); err != nil {
			return Result{}, fmt.Errorf("%s: round %d: %w", s.Name(), i, err)
		}
	}
	if r.reaped == start {
		return Result{}, fmt.Errorf("%s: no buffer completed in %d rounds", s.Name(), rounds)
	}
	return r.result(r.reaped - start), nil
}

func (r *rig) result(bufs int) Result {
	res := Result{Scenario: r.s, Buffers: bufs, ByField: map[string][2]float64{}}
	b := float64(bufs)
	for k, v := range r.cache.Counts() {
		res.ByField[k] = [2]float64{float64(v[0]) / b, float64(v[1]) / b}
		res.Driver += float64(v[0]) / b
		res.Device += float64(v[1]) / b
	}
	res.Total = res.Driver + res.Device
	res.Kicks, res.Interrupts = float64(r.kicks)/b, float64(r.irqs)/b
	return res
}

// round is one turn of the driver, then one of the device.
func (r *rig) round() error {
	before := r.reaped
	if err := r.driverTurn(); err != nil {
		return err
	}
	if err := r.deviceTurn(); err != nil {
		return err
	}
	if r.reaped == before && r.asleep && r.added-r.popped > r.availLag {
		// Buffers wait for a device that was never told: a lost
		// kick, the hang a ring must never have.
		return fmt.Errorf("stalled: %d chains available, device asleep and not kicked", r.added-r.popped)
	}
	if !r.s.Poll && r.used() > r.reaped {
		// An interrupt-driven driver reaps everything its interrupt
		// finds; used buffers left over were never announced.
		return fmt.Errorf("stalled: %d used buffers and no interrupt for them", r.used()-r.reaped)
	}
	return nil
}

func (r *rig) driverTurn() error {
	if r.s.Poll {
		for r.used()-r.reaped > r.usedLag {
			if _, _, ok := r.drv.GetBuf(); !ok {
				return fmt.Errorf("driver found no used buffer where %d were used", r.used()-r.reaped)
			}
			r.reaped++
		}
	}
	n := 0
	buf := vring.Buf{Out: 1, In: r.s.Chain - 1, Len: 512}
	for r.added-r.reaped < r.s.InFlight {
		if _, ok := r.drv.Add(buf); !ok {
			return fmt.Errorf("ring full with %d chains in flight", r.added-r.reaped)
		}
		r.added++
		n++
	}
	if n > 0 && r.drv.KickPrepare() {
		r.kicks++
		r.asleep = false
	}
	return nil
}

// used is the number of chains the device has completed.
func (r *rig) used() int { return r.popped - len(r.held) }

func (r *rig) deviceTurn() error {
	if r.asleep {
		return nil
	}
	m := r.devMem
	if r.armed {
		// As the Loop: kicks off for as long as the device is awake.
		if err := r.dev.DisableNotify(m); err != nil {
			return err
		}
		r.armed = false
	}
	for r.added-r.popped > r.availLag {
		c, err := r.dev.Pop(m)
		if err != nil {
			return err
		}
		if c == nil {
			return fmt.Errorf("device found nothing where %d chains were added", r.added-r.popped)
		}
		r.held = append(r.held, c.Head)
		r.popped++
	}
	r.elems = r.elems[:0]
	for len(r.held) > r.hold {
		i := 0
		if r.s.OutOfOrder {
			i = r.rng.Intn(len(r.held))
		}
		r.elems = append(r.elems, virtio.UsedElem{Head: r.held[i]})
		r.held = append(r.held[:i], r.held[i+1:]...)
	}
	if len(r.elems) > 0 {
		if err := r.dev.AddUsedBatch(m, r.elems); err != nil {
			return err
		}
		irq, err := r.dev.NeedsInterrupt(m)
		if err != nil {
			return err
		}
		if irq {
			r.irqs++
			if !r.s.Poll {
				r.callback()
			}
		}
	}
	if r.added == r.popped {
		more, err := r.dev.EnableNotify(m)
		if err != nil {
			return err
		}
		r.armed, r.asleep = true, !more
	}
	return nil
}

// callback is the interrupt handler of virtio-blk (virtblk_done): reap
// with callbacks disabled until re-enabling them finds nothing new.
func (r *rig) callback() {
	if !r.drv.Interrupt() {
		return
	}
	for {
		r.drv.DisableCB()
		for {
			if _, _, ok := r.drv.GetBuf(); !ok {
				break
			}
			r.reaped++
		}
		if !r.drv.Poll(r.drv.EnableCBPrepare()) {
			return
		}
	}
}

// Fields lists a result's fields in a stable order.
func (res Result) Fields() []string {
	var ks []string
	for k := range res.ByField {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TraceRound warms a scenario up, runs it on until the driver's next add
// takes avail position pos (mod the ring size), and returns the transfers
// of the one round that follows, in the order they happened: the access
// sequence behind a count.
func TraceRound(s Scenario, pos int) ([]Event, error) {
	r, err := newRig(s)
	if err != nil {
		return nil, err
	}
	rounds := 4*int(s.Size)/s.Batch + 64
	for i := 0; i < rounds || r.added%int(s.Size) != pos; i++ {
		if i > rounds+int(s.Size) {
			return nil, fmt.Errorf("%s: never reached position %d", s.Name(), pos)
		}
		if err := r.round(); err != nil {
			return nil, err
		}
	}
	r.cache.Reset()
	r.cache.Trace(true)
	if err := r.round(); err != nil {
		return nil, err
	}
	return r.cache.Events(), nil
}

package irq

import (
	"errors"
	"testing"
)

type fakeChip struct {
	gsi   []uint32
	level []bool
	err   error
}

func (c *fakeChip) IRQLine(gsi uint32, level bool) error {
	c.gsi, c.level = append(c.gsi, gsi), append(c.level, level)
	return c.err
}

func TestKVMLine(t *testing.T) {
	c := &fakeChip{}
	var l Line = KVMLine{Chip: c, GSI: 10}
	if err := l.Set(true); err != nil {
		t.Fatal(err)
	}
	if err := l.Set(false); err != nil {
		t.Fatal(err)
	}
	if len(c.gsi) != 2 || c.gsi[0] != 10 || !c.level[0] || c.level[1] {
		t.Fatalf("chip saw %v %v", c.gsi, c.level)
	}
	c.err = errors.New("boom")
	if err := l.Set(true); !errors.Is(err, c.err) {
		t.Fatalf("error not wrapped: %v", err)
	}
}

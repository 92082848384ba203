package i8042

import (
	"testing"

	"github.com/govm/govm/iobus"
)

type rig struct {
	t      *testing.T
	bus    iobus.Bus
	c      *Controller
	resets int
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t}
	r.c = New(func() { r.resets++ })
	if err := r.c.Register(&r.bus); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) in(port uint16) byte {
	var b [1]byte
	if !r.bus.Read(port, b[:]) {
		r.t.Fatalf("port %#x unclaimed", port)
	}
	return b[0]
}

func (r *rig) out(port uint16, v byte) {
	if !r.bus.Write(port, []byte{v}) {
		r.t.Fatalf("port %#x unclaimed", port)
	}
}

// command mirrors Linux's __i8042_command: wait for IBF clear, write the
// command, send params, then wait for OBF and read each result. The
// polling bound stands in for I8042_CTL_TIMEOUT; failing it is a stall.
func (r *rig) command(cmd byte, params []byte, nres int) ([]byte, bool) {
	r.t.Helper()
	waitWrite := func() bool { return r.in(CommandPort)&stIBF == 0 }
	waitRead := func() bool { return r.in(CommandPort)&stOBF != 0 }
	if !waitWrite() {
		return nil, false
	}
	r.out(CommandPort, cmd)
	for _, p := range params {
		if !waitWrite() {
			return nil, false
		}
		r.out(DataPort, p)
	}
	var res []byte
	for i := 0; i < nres; i++ {
		if !waitRead() {
			return res, false
		}
		if cmd == cmdAuxLoop && r.in(CommandPort)&stAuxData == 0 {
			return res, false // Linux: "auxerr"
		}
		res = append(res, r.in(DataPort))
	}
	return res, true
}

func TestLinuxProbe(t *testing.T) {
	r := newRig(t)
	// i8042_controller_check: i8042_flush must find an empty buffer, not
	// a floating 0xff.
	if s := r.in(CommandPort); s == 0xff || s&stOBF != 0 {
		t.Fatalf("initial status %#x", s)
	}
	if res, ok := r.command(cmdSelfTest, nil, 1); !ok || res[0] != 0x55 {
		t.Fatalf("self-test: %x ok=%v", res, ok)
	}
	// i8042_controller_init: two equal CTR reads, then a CTR write.
	a, ok1 := r.command(cmdReadCTR, nil, 1)
	b, ok2 := r.command(cmdReadCTR, nil, 1)
	if !ok1 || !ok2 || a[0] != b[0] {
		t.Fatalf("unstable CTR %x %x", a, b)
	}
	ctr := (a[0] | ctrKbdDis) &^ ctrKbdInt
	if _, ok := r.command(cmdWriteCTR, []byte{ctr}, 0); !ok {
		t.Fatal("CTR write stalled")
	}
	if got, _ := r.command(cmdReadCTR, nil, 1); got[0] != ctr {
		t.Fatalf("CTR read back %#x, want %#x", got[0], ctr)
	}
	// i8042_check_aux (when noaux is not given): loopback with AUXDATA.
	if res, ok := r.command(cmdAuxLoop, []byte{0x5a}, 1); !ok || res[0] != 0x5a {
		t.Fatalf("aux loop: %x ok=%v", res, ok)
	}
	if _, ok := r.command(cmdAuxDisable, nil, 0); !ok {
		t.Fatal("aux disable stalled")
	}
	if got, _ := r.command(cmdReadCTR, nil, 1); got[0]&ctrAuxDis == 0 {
		t.Fatal("0xa7 did not set CTR AUXDIS")
	}
	r.command(cmdAuxEnable, nil, 0)
	if got, _ := r.command(cmdReadCTR, nil, 1); got[0]&ctrAuxDis != 0 {
		t.Fatal("0xa8 did not clear CTR AUXDIS")
	}
	if res, ok := r.command(cmdKbdTest, nil, 1); !ok || res[0] != 0 {
		t.Fatalf("kbd interface test: %x", res)
	}
	if s := r.in(CommandPort); s&stOBF != 0 {
		t.Fatalf("output left over after probe: status %#x", s)
	}
	if r.resets != 0 {
		t.Fatalf("probe reset the machine %d times", r.resets)
	}
}

func TestReset(t *testing.T) {
	tests := []struct {
		name   string
		cmd    byte
		params []byte
		want   int
	}{
		{"pulse reset 0xfe", 0xfe, nil, 1},
		{"pulse reset 0xf0 (all lines)", 0xf0, nil, 1},
		{"pulse 0xff (no line)", 0xff, nil, 0},
		{"pulse 0xfd (line 1 only)", 0xfd, nil, 0},
		{"write output port, reset low", cmdWriteOutput, []byte{0x02}, 1},
		{"write output port, reset high", cmdWriteOutput, []byte{0x03}, 0},
		{"self-test", cmdSelfTest, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.out(CommandPort, tc.cmd)
			for _, p := range tc.params {
				r.out(DataPort, p)
			}
			if r.resets != tc.want {
				t.Fatalf("resets = %d, want %d", r.resets, tc.want)
			}
		})
	}
}

func TestKeyboardReplies(t *testing.T) {
	tests := []struct {
		send []byte
		want []byte
	}{
		{[]byte{0xf2}, []byte{0xfa, 0xab, 0x83}},
		{[]byte{0xff}, []byte{0xfa, 0xaa}},
		{[]byte{0xed, 0x07}, []byte{0xfa, 0xfa}},
		{[]byte{0xf0, 0x00}, []byte{0xfa, 0xfa, 0x02}},
		{[]byte{0xee}, []byte{0xee}},
		{[]byte{0xf4}, []byte{0xfa}},
		{[]byte{0x42}, []byte{0xfe}},
	}
	for _, tc := range tests {
		r := newRig(t)
		for _, b := range tc.send {
			r.out(DataPort, b)
		}
		var got []byte
		for i := 0; i < 10 && r.in(CommandPort)&stOBF != 0; i++ {
			if r.in(CommandPort)&stAuxData != 0 {
				t.Fatalf("%x: keyboard reply flagged as aux", tc.send)
			}
			got = append(got, r.in(DataPort))
		}
		if string(got) != string(tc.want) {
			t.Errorf("send %x: got %x, want %x", tc.send, got, tc.want)
		}
	}
}

func TestStatusCommandBit(t *testing.T) {
	r := newRig(t)
	r.out(CommandPort, cmdReadCTR)
	if s := r.in(CommandPort); s&stCmd == 0 || s&stSys == 0 || s&stOBF == 0 {
		t.Fatalf("status after command %#x", s)
	}
	r.in(DataPort)
	r.out(DataPort, 0xf4)
	if s := r.in(CommandPort); s&stCmd != 0 {
		t.Fatalf("status after data write %#x still has CMD", s)
	}
}

func FuzzController(f *testing.F) {
	f.Add([]byte{0x64, 0xaa, 0x60, 0, 0x64, 0xd3, 0x60, 0x5a})
	f.Add([]byte{0x60, 0xf2, 0x60, 0xed, 0x60, 0xf0, 0x64, 0x60, 0x60, 0x00})
	f.Fuzz(func(t *testing.T, ops []byte) {
		c := New(func() {})
		for i := 0; i+1 < len(ops); i += 2 {
			off := uint16(ops[i] & 7)
			var buf [4]byte
			data := buf[:1+int(ops[i]>>3&3)]
			data[0] = ops[i+1]
			if ops[i]&0x80 != 0 {
				c.Read(off, data)
			} else {
				c.Write(off, data)
			}
			if len(c.queue) > maxQueue {
				t.Fatalf("queue grew to %d", len(c.queue))
			}
		}
	})
}

package debugexit

import "testing"

func TestStatus(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want int
	}{
		{"byte 0", []byte{0}, 1},
		{"byte 1", []byte{1}, 3},
		{"byte 0x7f", []byte{0x7f}, 0xff},
		{"word", []byte{0x34, 0x12}, 0x1234<<1 | 1},
		{"dword", []byte{0xff, 0xff, 0xff, 0xff}, 0x1ffffffff},
		{"too wide", []byte{1, 0, 0, 0, 9, 9}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			d := New(func(s int) { got = append(got, s) })
			d.Write(0, tc.data)
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("exit calls %v, want [%d]", got, tc.want)
			}
		})
	}
}

func TestReadFloats(t *testing.T) {
	called := false
	d := New(func(int) { called = true })
	b := []byte{0, 0}
	d.Read(0, b)
	if b[0] != 0xff || b[1] != 0xff || called {
		t.Fatalf("read %x, exit called %v", b, called)
	}
}

// FuzzWrite: any access width and offset produces exactly one odd status
// computed from the first four bytes.
func FuzzWrite(f *testing.F) {
	f.Add(uint16(0), []byte{7})
	f.Fuzz(func(t *testing.T, off uint16, data []byte) {
		var got []int
		d := New(func(s int) { got = append(got, s) })
		d.Write(off, data)
		var v uint64
		for i := 0; i < len(data) && i < 4; i++ {
			v |= uint64(data[i]) << (8 * i)
		}
		if len(got) != 1 || got[0] != int(v<<1|1) {
			t.Fatalf("exit calls %v for % x", got, data)
		}
	})
}

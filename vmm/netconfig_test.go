package vmm

import "testing"

func TestDefaultMAC(t *testing.T) {
	a, b := DefaultMAC("vm1"), DefaultMAC("vm2")
	if a.String() == b.String() || a.String() != DefaultMAC("vm1").String() {
		t.Errorf("DefaultMAC not stable and distinct: %v %v", a, b)
	}
	if a[0] != 0x52 || a[0]&1 != 0 {
		t.Errorf("DefaultMAC %v: want 52:54:00:xx:xx:xx unicast", a)
	}
	if err := a.Check(); err != nil {
		t.Errorf("DefaultMAC %v is not a valid guest MAC: %v", a, err)
	}
}

package cpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govm/govm/kvm"
)

// hostTable is an abbreviated KVM_GET_SUPPORTED_CPUID (AMD-like, with Intel
// leaf 4 caches too), with every feature bit the filter touches set.
func hostTable() []kvm.CPUIDEntry {
	sig := uint32(kvm.CPUIDFlagSignificantIndex)
	return []kvm.CPUIDEntry{
		{Function: 0, EAX: 0x1f},
		{Function: 1, EAX: 0xa10f11, EBX: 0x00020800, ECX: 0x7ffefbff, EDX: 0x078bfbff},
		{Function: 4, Index: 0, Flags: sig, EAX: 0x121 | 3<<14 | 7<<26},
		{Function: 4, Index: 3, Flags: sig, EAX: 0x163 | 15<<14 | 7<<26},
		{Function: 4, Index: 4, Flags: sig},
		{Function: 7, Index: 0, Flags: sig, EBX: 0xffffffff, ECX: 0xffffffff, EDX: 0xffffffff},
		{Function: 7, Index: 1, Flags: sig, EAX: 0xffffffff},
		{Function: 0xB, Flags: sig},
		{Function: 0xD, Index: 0, Flags: sig, EAX: 0xe7, EBX: 0x980, ECX: 0x980},
		{Function: 0xD, Index: 2, Flags: sig, EAX: 0x100, EBX: 0x240},
		{Function: 0x1F, Flags: sig},
		{Function: 0x80000001, ECX: 0xffffffff, EDX: 0x23d3fbff},
		{Function: 0x80000008, EAX: 0x3030, ECX: 0x7001},
		{Function: 0x8000001D, Index: 0, Flags: sig, EAX: 0x121 | 1<<14},
		{Function: 0x8000001D, Index: 3, Flags: sig, EAX: 0x163 | 1<<14},
		{Function: 0x8000001E},
	}
}

func find(t *testing.T, es []kvm.CPUIDEntry, fn, idx uint32) kvm.CPUIDEntry {
	t.Helper()
	for _, e := range es {
		if e.Function == fn && e.Index == idx {
			return e
		}
	}
	t.Fatalf("leaf %#x.%d missing", fn, idx)
	return kvm.CPUIDEntry{}
}

func TestFilterCPUIDTopology(t *testing.T) {
	tests := []struct{ id, ncpus int }{{0, 1}, {0, 2}, {1, 2}, {3, 4}, {5, 6}}
	for _, tt := range tests {
		in := hostTable()
		out := FilterCPUID(in, tt.id, tt.ncpus, false)
		if in[1].EBX != 0x00020800 {
			t.Fatal("FilterCPUID modified its input")
		}
		id, n := uint32(tt.id), uint32(tt.ncpus)
		l1 := find(t, out, 1, 0)
		if l1.EBX>>24 != id || l1.EBX>>16&0xff != n || l1.EBX&0xffff != 0x0800 {
			t.Errorf("%v: leaf1 EBX = %#x", tt, l1.EBX)
		}
		if l1.ECX&(1<<31) == 0 {
			t.Errorf("%v: hypervisor bit clear", tt)
		}
		if htt := l1.EDX&(1<<28) != 0; htt != (tt.ncpus > 1) {
			t.Errorf("%v: HTT = %v", tt, htt)
		}
		for _, leaf := range []uint32{0xB, 0x1F} {
			smt, core, end := find(t, out, leaf, 0), find(t, out, leaf, 1), find(t, out, leaf, 2)
			if smt.EBX != 1 || smt.ECX != 0x100 || smt.EAX != 0 || smt.EDX != id {
				t.Errorf("%v: leaf %#x.0 = %+v", tt, leaf, smt)
			}
			if core.EBX != n || core.ECX != 0x201 || 1<<core.EAX < n || core.EDX != id {
				t.Errorf("%v: leaf %#x.1 = %+v", tt, leaf, core)
			}
			if end.ECX>>8&0xff != 0 || end.EBX != 0 || end.EDX != id {
				t.Errorf("%v: leaf %#x.2 = %+v, want invalid level", tt, leaf, end)
			}
		}
		l1c, l3c := find(t, out, 4, 0), find(t, out, 4, 3)
		if l1c.EAX>>26 != n-1 || l1c.EAX>>14&0xfff != 0 || l3c.EAX>>14&0xfff != n-1 || l1c.EAX&0x3fff != 0x121 {
			t.Errorf("%v: leaf 4 EAX %#x / %#x", tt, l1c.EAX, l3c.EAX)
		}
		if e := find(t, out, 4, 4); e.EAX != 0 {
			t.Errorf("%v: null cache leaf changed: %#x", tt, e.EAX)
		}
		if e := find(t, out, 0x80000008, 0); e.ECX&0xff != n-1 || 1<<(e.ECX>>12&0xf) < n || e.EAX != 0x3030 {
			t.Errorf("%v: leaf 0x80000008 = %+v", tt, e)
		}
		if e := find(t, out, 0x8000001D, 3); e.EAX>>14&0xfff != n-1 {
			t.Errorf("%v: AMD L3 sharing = %#x", tt, e.EAX)
		}
		if e := find(t, out, 0x8000001D, 0); e.EAX>>14&0xfff != 0 {
			t.Errorf("%v: AMD L1 sharing = %#x", tt, e.EAX)
		}
		if e := find(t, out, 0x8000001E, 0); e.EAX != id || e.EBX&0xff != id || e.EBX>>8&0xff != 0 {
			t.Errorf("%v: leaf 0x8000001E = %+v", tt, e)
		}
		// Without emulationOnly nothing is hidden.
		if find(t, out, 1, 0).ECX&(1<<13) == 0 || find(t, out, 0xD, 0).EAX != 0xe7 {
			t.Errorf("%v: features hidden without emulationOnly", tt)
		}
	}
}

func TestFilterCPUIDEmulationOnly(t *testing.T) {
	out := FilterCPUID(hostTable(), 0, 2, true)
	for _, h := range emulatorHidden {
		idx := h.subleaf
		if idx == anySubleaf {
			idx = 0
		}
		e := find(t, out, h.leaf, idx)
		if *reg(&e, h.reg)&(1<<h.bit) != 0 {
			t.Errorf("%s (leaf %#x.%d reg %d bit %d) still set", h.name, h.leaf, idx, h.reg, h.bit)
		}
	}
	for _, idx := range []uint32{0, 2} {
		if e := find(t, out, 0xD, idx); e.EAX|e.EBX|e.ECX|e.EDX != 0 {
			t.Errorf("leaf 0xD.%d = %+v, want zero", idx, e)
		}
	}
	l1 := find(t, out, 1, 0)
	// Kept: SSE3 (0), MOVBE (22), x2APIC (21), TSC deadline (24), hypervisor.
	for _, bit := range []uint{0, 21, 22, 24, 31} {
		if l1.ECX&(1<<bit) == 0 {
			t.Errorf("leaf 1 ECX bit %d cleared but not in the table", bit)
		}
	}
	if l1.EDX != 0x078bfbff|1<<28 {
		t.Errorf("leaf 1 EDX = %#x, want host EDX + HTT", l1.EDX)
	}
	// The leaf 7 bits outside the table stay (e.g. SMEP 7, ERMS 9, UMIP ECX 2).
	l7 := find(t, out, 7, 0)
	if l7.EBX&(1<<7|1<<9) != 1<<7|1<<9 || l7.ECX&(1<<2) == 0 {
		t.Errorf("leaf 7 EBX %#x ECX %#x lost bits the table does not name", l7.EBX, l7.ECX)
	}
	if got := find(t, out, 0x80000001, 0).ECX; got&(1<<5|1<<6|1<<11|1<<16|1<<21) != 0 || got&1 == 0 {
		t.Errorf("leaf 0x80000001 ECX = %#x", got)
	}
}

func TestFilterCPUIDNoDuplicateTopology(t *testing.T) {
	in := append(hostTable(), kvm.CPUIDEntry{Function: 0xB, Index: 1, Flags: 1})
	out := FilterCPUID(in, 0, 2, false)
	count := 0
	for _, e := range out {
		if e.Function == 0xB {
			count++
		}
	}
	if count != 3 {
		t.Fatalf("leaf 0xB has %d entries, want 3", count)
	}
}

func TestEmulationOnly(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pvm := filepath.Join(dir, "kvm_pvm")
	if err := os.Mkdir(pvm, 0o755); err != nil {
		t.Fatal(err)
	}
	vmx := write("vmx", "processor\t: 0\nflags\t\t: fpu vme vmx sse2\n\nprocessor\t: 1\nflags\t\t: fpu vme vmx sse2\n")
	svm := write("svm", "flags\t\t: fpu svm\n")
	none := write("none", "processor\t: 0\nflags\t\t: fpu vme de pse hypervisor svm_lock vmx_x\n")
	noflags := write("noflags", "processor\t: 0\n")
	missing := filepath.Join(dir, "absent")
	tests := []struct {
		name         string
		mod, cpuinfo string
		want         bool
		reason       string
	}{
		{"pvm module", pvm, vmx, true, "kvm_pvm"},
		{"vmx", missing, vmx, false, ""},
		{"svm", missing, svm, false, ""},
		{"no vmx or svm", missing, none, true, "neither vmx nor svm"},
		{"no flags line", missing, noflags, false, ""},
		{"no cpuinfo", missing, missing, false, ""},
	}
	for _, tt := range tests {
		got, why := emulationOnly(tt.mod, tt.cpuinfo)
		if got != tt.want || !strings.Contains(why, tt.reason) || (tt.reason == "") != (why == "") {
			t.Errorf("%s: got %v %q, want %v containing %q", tt.name, got, why, tt.want, tt.reason)
		}
	}
}

func TestApicIDBits(t *testing.T) {
	for n, want := range map[int]uint32{1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 8: 3, 9: 4, 255: 8} {
		if got := apicIDBits(n); got != want {
			t.Errorf("apicIDBits(%d) = %d, want %d", n, got, want)
		}
	}
}

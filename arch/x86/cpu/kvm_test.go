package cpu

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/kvm"
	"golang.org/x/sys/unix"
)

// These tests run a few 64-bit instructions on the real /dev/kvm. On
// kvm_pvm they are emulated (CPL0), which is fine for a handful.

func newVM(t *testing.T, irqchip bool, memSize int) (*kvm.System, *kvm.VM, *guestmem.Memory) {
	t.Helper()
	if _, err := os.Stat(kvm.DefaultPath); errors.Is(err, os.ErrNotExist) {
		t.Skip("no /dev/kvm on this machine: real-KVM tests need it")
	}
	sys, err := kvm.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	vm, err := sys.CreateVM()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vm.Close() })
	if err := vm.SetTSSAddr(layout.KVMTSSAddr); err != nil {
		t.Fatal(err)
	}
	if irqchip {
		if err := vm.CreateIRQChip(); err != nil {
			t.Fatal(err)
		}
	}
	host, err := unix.Mmap(-1, 0, memSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(host) })
	if err := vm.SetUserMemoryRegion(0, 0, host, 0); err != nil {
		t.Fatal(err)
	}
	mem, err := guestmem.New(guestmem.Region{GPA: 0, Host: host})
	if err != nil {
		t.Fatal(err)
	}
	return sys, vm, mem
}

func TestSetupLongModeRunsOnKVM(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sys, vm, mem := newVM(t, false, 4<<20)
	const entry, zeroPage = layout.KernelLoadAddr, layout.ZeroPageAddr
	prog := []byte{
		0x48, 0xb8, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // movabs $0x1122334455667788,%rax
		0x48, 0x89, 0x06, // mov %rax,(%rsi)        (RSI = zero page)
		0xbb, 0x00, 0x10, 0x00, 0xc0, // mov $0xc0001000,%ebx (PD 3, MMIO hole)
		0x8b, 0x0b, // mov (%rbx),%ecx
		0xe7, 0x10, // out %eax,$0x10
		0xf4, // hlt
	}
	if err := mem.WriteAt(prog, entry); err != nil {
		t.Fatal(err)
	}
	v, err := vm.CreateVCPU(0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	supported, err := sys.SupportedCPUID()
	if err != nil {
		t.Fatal(err)
	}
	emu, _ := EmulationOnly()
	if err := v.SetCPUID(FilterCPUID(supported, 0, 1, emu)); err != nil {
		t.Fatal(err)
	}
	if err := SetupLongMode(mem, v, entry, zeroPage); err != nil {
		t.Fatal(err)
	}

	exit, err := v.Run()
	if err != nil {
		t.Fatal(err)
	}
	mmio, ok := exit.(kvm.ExitMMIO)
	if !ok || mmio.Addr != 0xc0001000 || mmio.Write || len(mmio.Data) != 4 {
		t.Fatalf("first exit = %#v, want a 4-byte MMIO read of 0xc0001000", exit)
	}
	copy(mmio.Data, []byte{0xef, 0xbe, 0xad, 0xde})
	exit, err = v.Run()
	if err != nil {
		t.Fatal(err)
	}
	io, ok := exit.(kvm.ExitIO)
	if !ok || io.Port != 0x10 || !io.Write || io.Size != 4 || string(io.Data) != "\x88\x77\x66\x55" {
		t.Fatalf("second exit = %#v, want OUT of 0x55667788 to port 0x10", exit)
	}
	if exit, err = v.Run(); err != nil || exit != (kvm.ExitHLT{}) {
		t.Fatalf("third exit = %#v, %v; want ExitHLT", exit, err)
	}
	r, err := v.GetRegs()
	if err != nil {
		t.Fatal(err)
	}
	// A full 64-bit RAX proves the CPU decoded REX.W: long mode is on.
	if r.RAX != 0x1122334455667788 || r.RCX != 0xdeadbeef || r.RIP != entry+uint64(len(prog)) || r.RSI != zeroPage {
		t.Fatalf("regs after hlt: RAX %#x RCX %#x RIP %#x RSI %#x", r.RAX, r.RCX, r.RIP, r.RSI)
	}
	if got, _ := mem.Uint64(zeroPage); got != 0x1122334455667788 {
		t.Fatalf("store through RSI = %#x", got)
	}
	s, err := v.GetSregs()
	if err != nil {
		t.Fatal(err)
	}
	if s.EFER&eferLMA == 0 || s.CS.L != 1 || s.CS.Selector != SelectorCode || s.CR3 != layout.PML4Addr {
		t.Fatalf("sregs after run: EFER %#x CS %+v CR3 %#x", s.EFER, s.CS, s.CR3)
	}
	msrs, err := v.GetMSRs([]uint32{msrMiscEnable, msrMTRRDefType})
	if err != nil {
		t.Fatal(err)
	}
	if len(msrs) != 2 || msrs[0].Data&miscEnableFastSt == 0 || msrs[1].Data != mtrrEnable|mtrrTypeWB {
		t.Fatalf("boot MSRs read back as %+v", msrs)
	}
}

func TestSetupLAPICOnKVM(t *testing.T) {
	_, vm, _ := newVM(t, true, 2<<20)
	v, err := vm.CreateVCPU(0)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := SetupLAPIC(v); err != nil {
		t.Fatal(err)
	}
	l, err := v.GetLAPIC()
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Reg(lapicLVT0) & lvtDeliveryMask; got != lvtDeliveryExtINT {
		t.Errorf("LINT0 delivery mode = %#x, want ExtINT", got)
	}
	if got := l.Reg(lapicLVT1) & lvtDeliveryMask; got != lvtDeliveryNMI {
		t.Errorf("LINT1 delivery mode = %#x, want NMI", got)
	}
}

func TestFilteredCPUIDAcceptedForEachVCPU(t *testing.T) {
	sys, vm, _ := newVM(t, true, 2<<20)
	supported, err := sys.SupportedCPUID()
	if err != nil {
		t.Fatal(err)
	}
	for id := 0; id < 2; id++ {
		v, err := vm.CreateVCPU(id)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		// KVM_SET_CPUID2 may be repeated until the first KVM_RUN.
		for _, emu := range []bool{false, true} {
			if err := v.SetCPUID(FilterCPUID(supported, id, 2, emu)); err != nil {
				t.Errorf("vcpu %d emulationOnly=%v: %v", id, emu, err)
			}
		}
	}
}

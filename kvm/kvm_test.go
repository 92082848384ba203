package kvm

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests drive the real /dev/kvm. On this project's hosts KVM is
// kvm_pvm, whose real-mode guest code runs in KVM's instruction emulator:
// the programs are a handful of instructions.

const testMemSize = 2 << 20

func openKVM(t *testing.T) *System {
	t.Helper()
	if _, err := os.Stat(DefaultPath); errors.Is(err, os.ErrNotExist) {
		t.Skip("no /dev/kvm on this machine: real-KVM tests need it")
	}
	s, err := Open(DefaultPath)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// guestVM creates a VM with testMemSize of RAM at GPA 0 holding code at
// 0x1000, and vCPU 0 in real mode at CS:IP 0:0x1000.
func guestVM(t *testing.T, s *System, irqchip bool, code []byte) (*VM, *VCPU, []byte) {
	t.Helper()
	vm, err := s.CreateVM()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vm.Close() })
	if err := vm.SetTSSAddr(0xfffbd000); err != nil {
		t.Fatal(err)
	}
	if err := vm.SetIdentityMapAddr(0xfffbc000); err != nil {
		t.Fatal(err)
	}
	if irqchip {
		if err := vm.CreateIRQChip(); err != nil {
			t.Fatal(err)
		}
	}
	mem, err := unix.Mmap(-1, 0, testMemSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	copy(mem[0x1000:], code)
	if err := vm.SetUserMemoryRegion(0, 0, mem, 0); err != nil {
		t.Fatal(err)
	}
	v, err := vm.CreateVCPU(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	sr, err := v.GetSregs()
	if err != nil {
		t.Fatal(err)
	}
	sr.CS.Base, sr.CS.Selector = 0, 0
	if err := v.SetSregs(sr); err != nil {
		t.Fatal(err)
	}
	if err := v.SetRegs(&Regs{RIP: 0x1000, RFLAGS: 2}); err != nil {
		t.Fatal(err)
	}
	return vm, v, mem
}

func run(t *testing.T, v *VCPU) Exit {
	t.Helper()
	e, err := v.Run()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return e
}

func TestSystemQueries(t *testing.T) {
	s := openKVM(t)
	if v, err := s.APIVersion(); err != nil || v != 12 {
		t.Fatalf("APIVersion = %d, %v", v, err)
	}
	for _, c := range []Cap{CapUserMemory, CapIRQChip, CapNrVCPUs, CapImmediateExit} {
		n, err := s.CheckExtension(c)
		if err != nil {
			t.Fatal(err)
		}
		if n <= 0 {
			t.Errorf("CheckExtension(%d) = %d, want > 0", c, n)
		}
	}
	cpuid, err := s.SupportedCPUID()
	if err != nil {
		t.Fatal(err)
	}
	var leaf0, leaf1 bool
	for _, e := range cpuid {
		leaf0 = leaf0 || e.Function == 0 && e.EAX >= 1
		leaf1 = leaf1 || e.Function == 1
	}
	if !leaf0 || !leaf1 {
		t.Fatalf("SupportedCPUID (%d entries) lacks leaf 0 or 1", len(cpuid))
	}
}

func TestRealModeIO(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := openKVM(t)
	// mov $0x42,%al; out %al,$0x10; in $0x11,%al; out %al,$0x12; hlt
	_, v, _ := guestVM(t, s, false, []byte{0xb0, 0x42, 0xe6, 0x10, 0xe4, 0x11, 0xe6, 0x12, 0xf4})

	io, ok := run(t, v).(ExitIO)
	if !ok || io.Port != 0x10 || io.Size != 1 || !io.Write || io.Count != 1 || len(io.Data) != 1 || io.Data[0] != 0x42 {
		t.Fatalf("first exit = %#v, want OUT 0x42 to port 0x10", io)
	}
	in, ok := run(t, v).(ExitIO)
	if !ok || in.Port != 0x11 || in.Write || len(in.Data) != 1 {
		t.Fatalf("second exit = %#v, want IN from port 0x11", in)
	}
	in.Data[0] = 0x77
	out, ok := run(t, v).(ExitIO)
	if !ok || out.Port != 0x12 || !out.Write || out.Data[0] != 0x77 {
		t.Fatalf("third exit = %#v, want OUT 0x77 (the IN answer) to port 0x12", out)
	}
	if e := run(t, v); e != (ExitHLT{}) {
		t.Fatalf("last exit = %#v, want ExitHLT", e)
	}
	r, err := v.GetRegs()
	if err != nil {
		t.Fatal(err)
	}
	if r.RIP != 0x1009 || r.RAX&0xff != 0x77 {
		t.Fatalf("after hlt RIP=%#x RAX=%#x, want 0x1009 and AL=0x77", r.RIP, r.RAX)
	}
}

func TestIRQChipAndLine(t *testing.T) {
	s := openKVM(t)
	vm, v, _ := guestVM(t, s, true, []byte{0xf4})
	if err := vm.CreatePIT2(); err != nil {
		t.Fatal(err)
	}
	for _, gsi := range []uint32{4, 5, 10, 11} {
		if err := vm.IRQLine(gsi, true); err != nil {
			t.Fatal(err)
		}
		if err := vm.IRQLine(gsi, false); err != nil {
			t.Fatal(err)
		}
	}
	l, err := v.GetLAPIC()
	if err != nil {
		t.Fatal(err)
	}
	// The APIC version register (0x30) of KVM's LAPIC reads 0x14 in its
	// low byte (an integrated xAPIC).
	if ver := l.Reg(0x30) & 0xff; ver != 0x14 {
		t.Fatalf("LAPIC version = %#x, want 0x14", ver)
	}
	l.SetReg(0x350, 0x700)
	if err := v.SetLAPIC(l); err != nil {
		t.Fatal(err)
	}
	l2, err := v.GetLAPIC()
	if err != nil {
		t.Fatal(err)
	}
	if got := l2.Reg(0x350); got != 0x700 {
		t.Fatalf("LVT0 after SetLAPIC = %#x, want 0x700", got)
	}
}

func TestIOEventFD(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := openKVM(t)
	// mov $0x42,%al; out %al,$0x10; out %al,$0x14; hlt
	vm, v, _ := guestVM(t, s, false, []byte{0xb0, 0x42, 0xe6, 0x10, 0xe6, 0x14, 0xf4})
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if err := vm.RegisterIOEventFD(0x10, 1, efd, true); err != nil {
		t.Fatal(err)
	}
	io, ok := run(t, v).(ExitIO)
	if !ok || io.Port != 0x14 {
		t.Fatalf("exit = %#v, want the OUT to 0x14 (0x10 goes to the eventfd)", io)
	}
	var cnt [8]byte
	if n, err := unix.Read(efd, cnt[:]); err != nil || n != 8 || cnt[0] != 1 {
		t.Fatalf("eventfd read = %d, %v, % x; want count 1", n, err, cnt)
	}
	if err := vm.UnregisterIOEventFD(0x10, 1, efd, true); err != nil {
		t.Fatal(err)
	}
	if err := vm.UnregisterIOEventFD(0x10, 1, efd, true); err == nil {
		t.Fatal("second unregister succeeded")
	}
}

// TestIOEventFDDatamatch: two eventfds on one port, each matching one
// value (one per virtqueue on QUEUE_NOTIFY); a write of another value exits.
func TestIOEventFDDatamatch(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := openKVM(t)
	// Real mode: mov $1,%ax; out %ax,$0x10; mov $0,%ax; out %ax,$0x10;
	// mov $2,%ax; out %ax,$0x10; hlt
	code := []byte{0xb8, 1, 0, 0xe7, 0x10, 0xb8, 0, 0, 0xe7, 0x10, 0xb8, 2, 0, 0xe7, 0x10, 0xf4}
	vm, v, _ := guestVM(t, s, false, code)
	var efd [2]int
	for q := range efd {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		efd[q] = fd
		if err := vm.RegisterIOEventFDMatch(0x10, 2, fd, true, uint64(q)); err != nil {
			t.Fatal(err)
		}
	}
	io, ok := run(t, v).(ExitIO)
	if !ok || io.Port != 0x10 || io.Data[0] != 2 {
		t.Fatalf("exit = %#v, want the unmatched OUT of 2 to port 0x10", io)
	}
	var cnt [8]byte
	for q, fd := range efd {
		if n, err := unix.Read(fd, cnt[:]); err != nil || n != 8 || cnt[0] != 1 {
			t.Fatalf("queue %d eventfd read = %d, %v, % x; want count 1", q, n, err, cnt)
		}
		if err := vm.UnregisterIOEventFDMatch(0x10, 2, fd, true, uint64(q)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInterrupt(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := openKVM(t)
	_, v, _ := guestVM(t, s, false, []byte{0xeb, 0xfe}) // jmp .

	// Before Run: the next Run returns at once.
	v.Interrupt()
	if e := run(t, v); e != (ExitIntr{}) {
		t.Fatalf("Run after Interrupt = %#v, want ExitIntr", e)
	}

	// During Run, from another goroutine. The loop never exits on its
	// own, so only the kick can end this Run.
	for i := 0; i < 3; i++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(20 * time.Millisecond)
			v.Interrupt()
		}()
		start := time.Now()
		e := run(t, v)
		<-done
		if e != (ExitIntr{}) {
			t.Fatalf("round %d: Run = %#v, want ExitIntr", i, e)
		}
		if d := time.Since(start); d < 15*time.Millisecond {
			t.Fatalf("round %d: Run returned after %v, before the Interrupt", i, d)
		}
	}
	r, err := v.GetRegs()
	if err != nil {
		t.Fatal(err)
	}
	if r.RIP != 0x1000 {
		t.Fatalf("RIP = %#x, want the loop at 0x1000", r.RIP)
	}
}

func TestVCPUState(t *testing.T) {
	s := openKVM(t)
	_, v, _ := guestVM(t, s, false, []byte{0xf4})
	want := Regs{RAX: 1, RBX: 2, R15: 0xf, RSP: 0x8ff0, RIP: 0x1234, RFLAGS: 0x202}
	if err := v.SetRegs(&want); err != nil {
		t.Fatal(err)
	}
	got, err := v.GetRegs()
	if err != nil {
		t.Fatal(err)
	}
	if *got != want {
		t.Fatalf("GetRegs = %+v, want %+v", *got, want)
	}
	if err := v.SetMSRs([]MSREntry{{Index: 0x174, Data: 0x10}, {Index: 0xc0000102, Data: 0xabc000}}); err != nil {
		t.Fatal(err)
	}
	msrs, err := v.GetMSRs([]uint32{0x174, 0xc0000102})
	if err != nil {
		t.Fatal(err)
	}
	if len(msrs) != 2 || msrs[0].Data != 0x10 || msrs[1].Data != 0xabc000 {
		t.Fatalf("GetMSRs = %+v", msrs)
	}
	err = v.SetMSRs([]MSREntry{{Index: 0x174}, {Index: 0xdeadbeef}})
	if !errors.Is(err, ErrMSRRejected) {
		t.Fatalf("SetMSRs of a bogus MSR: %v, want ErrMSRRejected", err)
	}
	// MXCSR is not checked: this host's KVM (kvm_pvm, 6.18) reports
	// mxcsr 0 from KVM_GET_FPU even right after KVM_SET_FPU of 0x1f80,
	// and at vCPU creation where it should be 0x1f80.
	fpu := FPU{FCW: 0x37e, MXCSR: 0x1f80}
	fpu.XMM[3][15] = 0x5a
	fpu.FPR[1][0] = 0xa5
	if err := v.SetFPU(&fpu); err != nil {
		t.Fatal(err)
	}
	f, err := v.GetFPU()
	if err != nil {
		t.Fatal(err)
	}
	if f.FCW != 0x37e || f.XMM[3][15] != 0x5a || f.FPR[1][0] != 0xa5 {
		t.Fatalf("FPU round trip: fcw=%#x xmm3[15]=%#x fpr1[0]=%#x", f.FCW, f.XMM[3][15], f.FPR[1][0])
	}
	cpuid, err := s.SupportedCPUID()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.SetCPUID(cpuid); err != nil {
		t.Fatal(err)
	}
	if st, err := v.GetMPState(); err != nil || st != MPStateRunnable {
		t.Fatalf("MP state of vcpu 0 = %d, %v; want runnable", st, err)
	}
}

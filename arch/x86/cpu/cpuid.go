// Package cpu prepares a vCPU for the Linux x86-64 boot protocol: the CPUID
// table it shows the guest, long mode with identity-mapped page tables
// (Documentation/x86/boot.rst, "64-bit BOOT PROTOCOL"), the boot MSRs and
// the local APIC's virtual-wire set-up.
package cpu

import (
	"bufio"
	"errors"
	"os"
	"strings"

	"github.com/govm/govm/kvm"
)

type cpuidReg int

const (
	regEAX cpuidReg = iota
	regEBX
	regECX
	regEDX
)

// anySubleaf matches every subleaf of a leaf in a hiddenBit.
const anySubleaf = ^uint32(0)

// hiddenBit is one CPUID feature bit FilterCPUID clears when guest kernel
// code runs in KVM's instruction emulator (arch/x86/kvm/emulate.c).
type hiddenBit struct {
	leaf, subleaf uint32
	reg           cpuidReg
	bit           uint
	name          string
}

// emulatorHidden is what the guest must not see on kvm_pvm. Everything the
// guest kernel runs at CPL0 goes through emulate.c, which decodes only the
// instructions KVM needs for MMIO and mode switches. Linux picks code paths
// (alternatives, crypto drivers, context switch) from these bits, and an
// instruction the emulator lacks kills the VM with
// KVM_EXIT_INTERNAL_ERROR. With the bit clear, Linux takes its generic
// path. The reasons:
//
//	leaf.sub reg bit  feature        why it is hidden
//	1        ECX  1   PCLMULQDQ      66 0F 3A 44 not in the emulator; ghash/crc drivers self-test at CPL0
//	1        ECX  9   SSSE3          crypto drivers (sha1/chacha ssse3) run vector code at CPL0; emulator has only a few SSE moves
//	1        ECX 12   FMA            VEX encoded; the emulator has no VEX decoding and no YMM state
//	1        ECX 13   CX16           CMPXCHG16B: group9 only has CMPXCHG8B (Linux's this_cpu_cmpxchg_double, SLUB)
//	1        ECX 17   PCID           CR3 PCID/no-flush semantics and INVPCID under emulation; Linux runs fine without
//	1        ECX 19   SSE4.1         as SSSE3
//	1        ECX 20   SSE4.2         CRC32 (F2 0F 38 F1) not emulated; crc32c-intel (ext4, jbd2) would use it
//	1        ECX 23   POPCNT         F3 0F B8 not emulated; hweight*() alternatives patch POPCNT into the kernel
//	1        ECX 25   AES            AES-NI not emulated; aesni-intel self-tests at CPL0
//	1        ECX 26   XSAVE          XSAVE/XRSTOR not emulated (Linux would XRSTOR on every return to user)
//	1        ECX 27   OSXSAVE        mirrors CR4.OSXSAVE, meaningless without XSAVE
//	1        ECX 28   AVX            needs XSAVE-managed YMM state; VEX encoded
//	1        ECX 29   F16C           VEX encoded
//	1        ECX 30   RDRAND         0F C7 /6 not in group9; the kernel's RNG would call it at CPL0
//	7.0      EBX  0   FSGSBASE       RD/WR{FS,GS}BASE (F3 0F AE /0-3) not emulated; used in every context switch
//	7.0      EBX  3   BMI1           VEX encoded
//	7.0      EBX  4   HLE            XACQUIRE/XRELEASE transactions not emulated
//	7.0      EBX  5   AVX2           needs XSAVE
//	7.0      EBX  8   BMI2           VEX encoded (MULX in poly1305/curve25519 drivers)
//	7.0      EBX 10   INVPCID        66 0F 38 82 not emulated (goes with PCID)
//	7.0      EBX 11   RTM            XBEGIN/XEND not emulated
//	7.0      EBX 16   AVX512F        needs XSAVE (likewise DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30, VL 31)
//	7.0      EBX 18   RDSEED         0F C7 /7 (no prefix) not in group9
//	7.0      EBX 19   ADX            ADCX/ADOX not emulated
//	7.0      EBX 20   SMAP           STAC/CLAC (0F 01 CB/CA) not in group7; Linux runs them around every user access
//	7.0      EBX 24   CLWB           66 0F AE /6 not in group15
//	7.0      EBX 29   SHA            SHA-NI not emulated
//	7.0      ECX  1   AVX512VBMI     needs XSAVE (likewise VBMI2 6, VNNI 11, BITALG 12, VPOPCNTDQ 14)
//	7.0      ECX  5   WAITPKG        UMONITOR/UMWAIT/TPAUSE not emulated
//	7.0      ECX  8   GFNI           SSE/VEX vector instructions not emulated
//	7.0      ECX  9   VAES           VEX encoded
//	7.0      ECX 10   VPCLMULQDQ     VEX encoded
//	7.0      EDX  2   AVX512_4VNNIW  needs XSAVE (likewise 4FMAPS 3, VP2INTERSECT 8, AMX-BF16 22, FP16 23, AMX-TILE 24, AMX-INT8 25)
//	7.1      EAX  4   AVX-VNNI       VEX encoded
//	7.1      EAX  5   AVX512_BF16    needs XSAVE
//	0xD.*    all      XSAVE leaf     zeroed: no XSAVE, so no state components to enumerate
//	80000001 ECX  5   ABM (LZCNT)    F3 0F BD decodes as BSR in the emulator: silently wrong results
//	80000001 ECX  6   SSE4A          vector instructions not emulated
//	80000001 ECX 11   XOP            VEX-like encoding not emulated
//	80000001 ECX 16   FMA4           as XOP
//	80000001 ECX 21   TBM            as XOP
var emulatorHidden = []hiddenBit{
	{1, anySubleaf, regECX, 1, "PCLMULQDQ"},
	{1, anySubleaf, regECX, 9, "SSSE3"},
	{1, anySubleaf, regECX, 12, "FMA"},
	{1, anySubleaf, regECX, 13, "CX16"},
	{1, anySubleaf, regECX, 17, "PCID"},
	{1, anySubleaf, regECX, 19, "SSE4.1"},
	{1, anySubleaf, regECX, 20, "SSE4.2"},
	{1, anySubleaf, regECX, 23, "POPCNT"},
	{1, anySubleaf, regECX, 25, "AES"},
	{1, anySubleaf, regECX, 26, "XSAVE"},
	{1, anySubleaf, regECX, 27, "OSXSAVE"},
	{1, anySubleaf, regECX, 28, "AVX"},
	{1, anySubleaf, regECX, 29, "F16C"},
	{1, anySubleaf, regECX, 30, "RDRAND"},
	{7, 0, regEBX, 0, "FSGSBASE"},
	{7, 0, regEBX, 3, "BMI1"},
	{7, 0, regEBX, 4, "HLE"},
	{7, 0, regEBX, 5, "AVX2"},
	{7, 0, regEBX, 8, "BMI2"},
	{7, 0, regEBX, 10, "INVPCID"},
	{7, 0, regEBX, 11, "RTM"},
	{7, 0, regEBX, 16, "AVX512F"},
	{7, 0, regEBX, 17, "AVX512DQ"},
	{7, 0, regEBX, 18, "RDSEED"},
	{7, 0, regEBX, 19, "ADX"},
	{7, 0, regEBX, 20, "SMAP"},
	{7, 0, regEBX, 21, "AVX512IFMA"},
	{7, 0, regEBX, 24, "CLWB"},
	{7, 0, regEBX, 26, "AVX512PF"},
	{7, 0, regEBX, 27, "AVX512ER"},
	{7, 0, regEBX, 28, "AVX512CD"},
	{7, 0, regEBX, 29, "SHA"},
	{7, 0, regEBX, 30, "AVX512BW"},
	{7, 0, regEBX, 31, "AVX512VL"},
	{7, 0, regECX, 1, "AVX512VBMI"},
	{7, 0, regECX, 5, "WAITPKG"},
	{7, 0, regECX, 6, "AVX512VBMI2"},
	{7, 0, regECX, 8, "GFNI"},
	{7, 0, regECX, 9, "VAES"},
	{7, 0, regECX, 10, "VPCLMULQDQ"},
	{7, 0, regECX, 11, "AVX512VNNI"},
	{7, 0, regECX, 12, "AVX512BITALG"},
	{7, 0, regECX, 14, "AVX512VPOPCNTDQ"},
	{7, 0, regEDX, 2, "AVX512_4VNNIW"},
	{7, 0, regEDX, 3, "AVX512_4FMAPS"},
	{7, 0, regEDX, 8, "AVX512_VP2INTERSECT"},
	{7, 0, regEDX, 22, "AMX-BF16"},
	{7, 0, regEDX, 23, "AVX512_FP16"},
	{7, 0, regEDX, 24, "AMX-TILE"},
	{7, 0, regEDX, 25, "AMX-INT8"},
	{7, 1, regEAX, 4, "AVX-VNNI"},
	{7, 1, regEAX, 5, "AVX512_BF16"},
	{0x80000001, anySubleaf, regECX, 5, "ABM"},
	{0x80000001, anySubleaf, regECX, 6, "SSE4A"},
	{0x80000001, anySubleaf, regECX, 11, "XOP"},
	{0x80000001, anySubleaf, regECX, 16, "FMA4"},
	{0x80000001, anySubleaf, regECX, 21, "TBM"},
}

// CPUID bits FilterCPUID sets.
const (
	leaf1EDXHTT        = 1 << 28 // leaf 1 EBX[23:16] is valid
	leaf1ECXHypervisor = 1 << 31 // "running under a hypervisor"
	leafXSAVE          = 0xD
)

func reg(e *kvm.CPUIDEntry, r cpuidReg) *uint32 {
	switch r {
	case regEAX:
		return &e.EAX
	case regEBX:
		return &e.EBX
	case regECX:
		return &e.ECX
	}
	return &e.EDX
}

// apicIDBits is how many low APIC-ID bits number n CPUs (ceil(log2 n)).
func apicIDBits(n int) uint32 {
	var b uint32
	for 1<<b < n {
		b++
	}
	return b
}

// FilterCPUID returns the CPUID table for vCPU id of ncpus, built from
// KVM's supported table (the input is not modified). The topology is one
// package of ncpus cores with one thread each: APIC ID = id in leaf 1
// EBX[31:24] and as the x2APIC ID of leaves 0xB/0x1F and 0x8000001E; leaf 1
// EBX[23:16] = ncpus with HTT set when ncpus > 1; leaf 4 / 0x8000001D cache
// sharing and 0x80000008 core count agree. The hypervisor bit is set. With
// emulationOnly (see EmulationOnly), the bits in emulatorHidden are
// cleared and leaf 0xD is zeroed.
//
// Measured on a kvm_pvm host (2026-11-30): a guest CPUID there returns the
// host CPU's values whatever KVM_SET_CPUID2 says (leaf 1 ECX 0xf7f81203 with
// XSAVE set, against 0x81200000 set), so the filter cannot stop a stock
// kernel from using XSAVE on such hosts; it dies on xrstor after printing
// its "Memory:" line. On hosts that intercept CPUID the filter applies.
func FilterCPUID(entries []kvm.CPUIDEntry, id, ncpus int, emulationOnly bool) []kvm.CPUIDEntry {
	if ncpus < 1 {
		ncpus = 1
	}
	out := make([]kvm.CPUIDEntry, 0, len(entries)+4)
	n := uint32(ncpus)
	apic := uint32(id)
	topoDone := map[uint32]bool{}
	for _, e := range entries {
		switch e.Function {
		case 1:
			e.EBX = e.EBX&0xffff | (apic&0xff)<<24 | (n&0xff)<<16
			e.ECX |= leaf1ECXHypervisor
			if ncpus > 1 {
				e.EDX |= leaf1EDXHTT
			} else {
				e.EDX &^= leaf1EDXHTT
			}
		case 4:
			// Intel deterministic cache parameters: EAX[31:26] cores
			// per package - 1, EAX[25:14] threads sharing this cache
			// - 1 (all cores share L3, nothing else is shared).
			if e.EAX&0x1f != 0 {
				e.EAX &^= 0xfc000000 | 0x03ffc000
				e.EAX |= (n - 1) << 26
				if (e.EAX>>5)&7 == 3 {
					e.EAX |= (n - 1) << 14
				}
			}
		case 0xB, 0x1F:
			// Extended topology: rebuilt whole (KVM reports one
			// empty subleaf), once per leaf.
			if !topoDone[e.Function] {
				topoDone[e.Function] = true
				out = append(out, topologyLeaf(e.Function, apic, n)...)
			}
			continue
		case leafXSAVE:
			if emulationOnly {
				e.EAX, e.EBX, e.ECX, e.EDX = 0, 0, 0, 0
			}
		case 0x80000008:
			// AMD: ECX[7:0] cores - 1, ECX[15:12] APIC ID bits.
			e.ECX = e.ECX&^0xf0ff | (n - 1) | apicIDBits(ncpus)<<12
		case 0x8000001D:
			// AMD cache topology, EAX[25:14] as in leaf 4.
			if e.EAX&0x1f != 0 {
				e.EAX &^= 0x03ffc000
				if (e.EAX>>5)&7 == 3 {
					e.EAX |= (n - 1) << 14
				}
			}
		case 0x8000001E:
			// AMD extended APIC ID, core ID = id, one thread per
			// core, node 0.
			e.EAX, e.EBX, e.ECX = apic, apic&0xff, 0
		}
		if emulationOnly {
			for _, h := range emulatorHidden {
				if h.leaf == e.Function && (h.subleaf == anySubleaf || h.subleaf == e.Index) {
					*reg(&e, h.reg) &^= 1 << h.bit
				}
			}
		}
		out = append(out, e)
	}
	return out
}

// topologyLeaf builds leaf 0xB or 0x1F: subleaf 0 is the SMT level (one
// thread), subleaf 1 the core level (ncpus cores), subleaf 2 terminates.
// EDX is the x2APIC ID at every subleaf; ECX[7:0] echoes the subleaf and
// ECX[15:8] is the level type (1 SMT, 2 core, 0 invalid).
func topologyLeaf(leaf, apic, n uint32) []kvm.CPUIDEntry {
	f := uint32(kvm.CPUIDFlagSignificantIndex)
	return []kvm.CPUIDEntry{
		{Function: leaf, Index: 0, Flags: f, EAX: 0, EBX: 1, ECX: 0 | 1<<8, EDX: apic},
		{Function: leaf, Index: 1, Flags: f, EAX: apicIDBits(int(n)), EBX: n, ECX: 1 | 2<<8, EDX: apic},
		{Function: leaf, Index: 2, Flags: f, EAX: 0, EBX: 0, ECX: 2, EDX: apic},
	}
}

// EmulatorParams are the kernel parameters govm adds on an emulation-only
// host (HOST.md), where the guest's CPUID shows the host's features
// whatever KVM_SET_CPUID2 says, so emulatorHidden cannot keep Linux off
// what KVM's emulator lacks; Linux's own switches can:
//
//	noxsave            XRSTOR in FPU set-up and on every return to user mode
//	clearcpuid=308     SMAP: CLAC/STAC on every entry and user copy
//	clearcpuid=151     POPCNT: patched into hweight*() (page allocator)
//	clearcpuid=297,580 ERMS, FSRM: REP MOVSB copies; without them Linux's
//	                   REP MOVSQ copies run ~3x faster in the emulator
//	rodata=off         marking text and rodata read-only splits and
//	                   rewrites the direct map's page tables: seconds of
//	                   emulated code
//	govm.pvm_syscall   turns on the guest side's fix for kvm_pvm's
//	                   SYSCALL quirk in a kernel that has it
//	                   (guest/linux/pvm-syscall.patch); others ignore it
//
// The bits go by number (X86_FEATURE_*, word*32+bit), which every kernel
// since 4.x parses; names need 5.19 and X86_FEATURE_NAMES. int3 and fwait
// are missing too, but a VMM can carry those out itself (vmm/emulate.go).
const EmulatorParams = "noxsave clearcpuid=308,151,297,580 rodata=off govm.pvm_syscall"

// Where EmulationOnly looks.
const (
	pvmModulePath = "/sys/module/kvm_pvm"
	cpuinfoPath   = "/proc/cpuinfo"
)

// EmulationOnly reports whether /dev/kvm runs guest kernel (CPL0) code in
// KVM's instruction emulator: the kvm_pvm module is loaded, or the CPU has
// neither vmx nor svm. The reason is meant for a one-line warning.
func EmulationOnly() (bool, string) {
	return emulationOnly(pvmModulePath, cpuinfoPath)
}

func emulationOnly(pvmModule, cpuinfo string) (bool, string) {
	if _, err := os.Stat(pvmModule); err == nil {
		return true, "kvm_pvm is loaded (" + pvmModule + "): guest kernel code runs in KVM's instruction emulator"
	}
	hw, err := hasVirtFlag(cpuinfo)
	if err != nil {
		return false, ""
	}
	if !hw {
		return true, "CPU has neither vmx nor svm (" + cpuinfo + "): guest kernel code runs in KVM's instruction emulator"
	}
	return false, ""
}

var errNoFlags = errors.New("cpu: no flags line in cpuinfo")

// hasVirtFlag reports whether a cpuinfo "flags" line lists vmx or svm.
func hasVirtFlag(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	seen := false
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "flags" {
			continue
		}
		seen = true
		for _, fl := range strings.Fields(v) {
			if fl == "vmx" || fl == "svm" {
				return true, nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	if !seen {
		return false, errNoFlags
	}
	return false, nil
}

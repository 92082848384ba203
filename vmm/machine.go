// Package vmm assembles a govm machine: KVM VM, guest RAM, boot state,
// platform devices and vCPU threads, and runs it until the guest ends.
package vmm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/govm/govm/arch/x86/cpu"
	"github.com/govm/govm/arch/x86/layout"
	"github.com/govm/govm/hw/pvpanic"
	"github.com/govm/govm/hw/serial"
	"github.com/govm/govm/iobus"
	"github.com/govm/govm/kvm"
	"github.com/govm/govm/pci"
	virtioblk "github.com/govm/govm/virtio/blk"
	virtioconsole "github.com/govm/govm/virtio/console"
	virtionet "github.com/govm/govm/virtio/net"
	virtio9p "github.com/govm/govm/virtio/p9"
	virtiopci "github.com/govm/govm/virtio/pci"
)

// Config is one VM's configuration, already validated for syntax by the CLI.
type Config struct {
	Name          string
	Kernel        string
	Initrd        string
	DefaultParams string // govm's defaults, prepended to Params
	// HostParams adds what this host needs on the command line, after
	// DefaultParams: cpu.EmulatorParams on an emulation-only host.
	HostParams bool
	Params     string
	MemSize    uint64
	CPUs       int
	DebugExit  bool
	// ExecStatus makes a debug-exit write of v end govm with status v
	// itself (govm run --exec: the guest's init hands over a command's
	// exit status), not QEMU's (v<<1)|1.
	ExecStatus bool
	// PVPanic adds a pvpanic PCI device (after the virtio devices).
	PVPanic bool
	// VirtioConsole adds a virtio-console device (after disks and nets):
	// the guest's output on it goes to Stdout, and Stdin goes to it
	// instead of the UART.
	VirtioConsole bool
	// RNG adds a virtio-rng entropy device (after disks and nets),
	// giving the guest at most RNGRate bytes per second (0: no limit).
	RNG     bool
	RNGRate uint64
	Disks   []DiskConfig
	// Shares are host directories served over virtio-9p.
	Shares  []ShareConfig
	Nets    []NetConfig
	KVMPath string // default /dev/kvm
	// KernelCacheDir keeps decompressed kernels between runs ("" = off);
	// DefaultKernelCacheDir gives the usual place.
	KernelCacheDir string
	Stdin          *os.File  // console input; nil for none
	Stdout         io.Writer // console output
	Log            io.Writer // govm's own one-line messages (stderr)
	// Watchdog is the lost-notification watchdog's T (0: off);
	// WatchdogRecover repairs what it finds (re-kick, re-raise).
	Watchdog        time.Duration
	WatchdogRecover bool
	// Faults are injected into every virtio device (watchdog tests).
	Faults virtiopci.Faults
	// PollMax bounds every virtio device's adaptive busy-poll window
	// (virtio.Poller); 0 turns polling off.
	PollMax time.Duration
}

// Result says why a VM ended and what govm's exit status should be.
type Result struct {
	Status int
	Reason string
	// Kind classifies the end for machine-readable verdicts.
	Kind ExitKind
	// GuestCode is the value the guest wrote to the debug-exit port, or
	// -1 when it wrote none.
	GuestCode int
}

// Machine is a configured, not yet running VM.
type Machine struct {
	cfg     Config
	startup startupRecord // CPU time at the first KVM_RUN
	sys     *kvm.System
	vm      *kvm.VM
	vcpus   []*kvm.VCPU
	ram     *ram
	bus     iobus.Bus
	boot    *bootInfo
	uart    *serial.UART
	vcons   *virtioconsole.Device // --console virtio, or nil
	// shareRoots are the shares' root descriptors, the only directories
	// the sandbox lets openat2 resolve beneath.
	shareRoots []int
	pci        *pci.Bus
	slots      []pciSlot
	nets       []*virtionet.Device
	shares     []*virtio9p.Device
	panic      *pvpanic.Device
	disks      []*virtioblk.Device

	emulationOnly bool
	emulationWhy  string
	// stuck is set when a vCPU or device did not stop within stopWait
	// (host I/O that never returns): Close then frees nothing it might
	// still use.
	stuck          atomic.Bool
	hostParams     string // what HostParams added to the command line
	restoreConsole func() // puts the user's terminal back; nil without one

	// closeMu orders Close against DeviceStats, which reads ring
	// indexes from guest RAM: Close takes it before it frees anything, so
	// a stats print (SIGUSR1) racing the exit either finishes first or
	// sees closed and reads nothing.
	closeMu sync.RWMutex
	closed  bool

	stopOnce  sync.Once
	closeOnce sync.Once
	done      chan struct{}
	result    Result

	control // control.go: pause state, exit counters, start time
}

func (m *Machine) logf(format string, args ...any) {
	if m.cfg.Log != nil {
		fmt.Fprintf(m.cfg.Log, "govm: "+format+"\n", args...)
	}
}

// New creates the VM and loads the guest; nothing runs until Run.
func New(cfg Config) (_ *Machine, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	m := &Machine{cfg: cfg, done: make(chan struct{})}
	m.initControl()
	defer func() {
		if err != nil {
			m.Close()
		}
	}()

	if m.sys, err = kvm.Open(cfg.KVMPath); err != nil {
		return nil, err
	}
	if n, err := m.sys.CheckExtension(kvm.CapMaxVCPUs); err == nil && n > 0 && cfg.CPUs > n {
		return nil, inputErrorf("--cpus %d: this host's KVM allows at most %d", cfg.CPUs, n)
	}
	m.emulationOnly, m.emulationWhy = cpu.EmulationOnly()
	if cfg.HostParams && m.emulationOnly {
		cfg.DefaultParams = strings.TrimSpace(cfg.DefaultParams + " " + cpu.EmulatorParams)
		m.cfg.DefaultParams = cfg.DefaultParams
		m.hostParams = cpu.EmulatorParams
	}
	if m.vm, err = m.sys.CreateVM(); err != nil {
		return nil, err
	}
	// Guest RAM goes in before the irqchip. Registering a slot waits for
	// an SRCU grace period (kvm_swap_active_memslots). On a VM without an
	// irqchip that wait is short; after KVM_CREATE_IRQCHIP it lasts
	// milliseconds of wall time with no CPU, most of the time to the
	// guest's first byte (measured in bench/README.md, "Start-up").
	if m.ram, err = allocRAM(cfg.MemSize); err != nil {
		return nil, err
	}
	for i, r := range m.ram.mem.Regions() {
		if err := m.vm.SetUserMemoryRegion(uint32(i), r.GPA, r.Host, 0); err != nil {
			return nil, err
		}
	}
	if err := m.vm.SetTSSAddr(layout.KVMTSSAddr); err != nil {
		return nil, err
	}
	if err := m.vm.SetIdentityMapAddr(layout.KVMIdentityMapAddr); err != nil {
		return nil, err
	}
	if err := m.vm.CreateIRQChip(); err != nil {
		return nil, err
	}
	if err := m.vm.CreatePIT2(); err != nil {
		return nil, err
	}

	if m.boot, err = loadKernel(&cfg, m.ram.mem, cfg.MemSize); err != nil {
		return nil, err
	}
	if err := m.setupDevices(); err != nil {
		return nil, err
	}
	if err := m.setupVCPUs(); err != nil {
		return nil, err
	}
	return m, nil
}

// Close releases everything New acquired, in this order, each step
// needing what a later one releases:
//  1. the console: the user's terminal is restored first, so whatever is
//     printed after reads normally;
//  2. the virtio devices, one closer each (pciSlot.close: reset through
//     the transport, close the transport, close the backend), after the
//     pause gate is opened: a reset waits for the device's goroutines,
//     which a pause holds. Before the VM, because the reset lowers the
//     device's INTx line and the transport unregisters its ioeventfds
//     through the VM fd; before guest RAM, because the device's goroutines
//     use it until the reset returns;
//  3. the vCPUs, the VM and /dev/kvm;
//  4. guest RAM, which KVM's memory slots point at until the VM is gone.
//
// A device whose close does not finish within stopWait (its host I/O does
// not return) is left behind, named on the log, and then nothing it might
// still use (vCPUs, the VM, guest RAM) is freed: the process is ending.
//
// Safe to call more than once, and on a Machine New gave up on halfway.
func (m *Machine) Close() {
	m.closeMu.Lock()
	m.closed = true
	m.closeMu.Unlock()
	m.closeOnce.Do(func() {
		if m.restoreConsole != nil {
			m.restoreConsole()
		}
		if m.gate != nil {
			m.gate.Open()
		}
		deadline := time.Now().Add(stopWait)
		for i := range m.slots {
			sl := &m.slots[i]
			if !waitWithin(func() { sl.close(m.logf) }, deadline) {
				m.stuck.Store(true)
				m.logf("%s: did not stop within %v: its host I/O does not return; left behind", sl.what, stopWait)
			}
		}
		if m.stuck.Load() {
			// A stuck device or vCPU may still write guest RAM or use
			// the VM when its host call returns: keep them; the
			// process is about to end.
			return
		}
		for _, v := range m.vcpus {
			_ = v.Close()
		}
		if m.vm != nil {
			_ = m.vm.Close()
		}
		if m.sys != nil {
			_ = m.sys.Close()
		}
		if m.ram != nil {
			m.ram.free()
		}
	})
}

// Stop ends the VM with the given result; the first caller wins.
func (m *Machine) Stop(r Result) {
	m.stopOnce.Do(func() {
		if r.Kind == "" {
			r.Kind = ExitInternalError
			if r.Status == 0 {
				r.Kind = ExitReset
			}
		}
		if r.GuestCode == 0 && r.Kind != ExitDebugExit {
			r.GuestCode = -1
		}
		m.result = r
		close(m.done)
		// Device goroutines held by a pause must run to see their
		// stop; parked vCPUs see done.
		m.gate.Open()
		for _, v := range m.vcpus {
			v.Interrupt()
		}
	})
}

// Run runs the VM until the guest ends it, a vCPU fails, or ctx is done.
func (m *Machine) Run(ctx context.Context) Result {
	if m.emulationOnly {
		added := ""
		if m.hostParams != "" {
			added = "; added " + m.hostParams + " to the kernel command line to keep Linux off what it lacks (--no-default-params leaves them out)"
		}
		m.logf("warning: %s (~2000x slower than native)%s", m.emulationWhy, added)
	}
	m.logf("booting %s (%s), entry %#x, %d MiB, %d vCPU", m.cfg.Kernel, m.boot.format, m.boot.entry, m.cfg.MemSize>>20, m.cfg.CPUs)
	if stop := m.startWatchdog(); stop != nil {
		defer stop()
	}
	defer m.watchHalt()()
	m.sizeProcs()
	var wg sync.WaitGroup
	for _, v := range m.vcpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.runVCPU(v)
		}()
	}
	select {
	case <-m.done:
	case <-ctx.Done():
		m.Stop(Result{Status: 0, Kind: ExitSignal, Reason: "stopped: " + context.Cause(ctx).Error()})
	}
	if !waitWithin(wg.Wait, time.Now().Add(stopWait)) {
		// Outside KVM_RUN, where no signal reaches it: in a device
		// call waiting for that device's I/O (a reset).
		m.stuck.Store(true)
		m.logf("a vCPU did not stop within %v: it waits for a device whose host I/O does not return; ending without it", stopWait)
	}
	m.flushConsole()
	return m.result
}

// stopWait bounds how long the end of a VM waits for a vCPU or a device
// stuck in host I/O that never returns (a disk image on a stalled FUSE or
// NFS mount): govm must still end when asked.
const stopWait = 2 * time.Second

// waitWithin runs wait (which returns when something has finished) and
// reports whether it returned before deadline. When it did not, its
// goroutine is left waiting.
func waitWithin(wait func(), deadline time.Time) bool {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(time.Until(deadline)):
		return false
	}
}

// IsInputError reports whether err was caused by bad user input (a file or
// flag), as opposed to a host failure.
func IsInputError(err error) bool {
	return errors.Is(err, ErrInput) || errors.Is(err, ErrMemSize) || errors.Is(err, kvm.ErrNoKVM)
}

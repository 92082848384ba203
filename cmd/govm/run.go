package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/govm/govm/api"
	"github.com/govm/govm/internal/outq"
	"github.com/govm/govm/internal/size"
	"github.com/govm/govm/sandbox"
	"github.com/govm/govm/vmm"
)

type runFlags struct {
	kernel, initrd, params, mem, name string
	apiSocket, watchdog, pollMax      string
	rngRate, console, rootfs          string
	command                           []string // after --: run in the host's tree
	watchdogRecover, noRNG            bool
	cpus                              int
	noDefaultParams, debugExit, stats bool
	disks, nets, shares               []string
	seccomp                           string
	smoke                             smokeFlags
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --kernel PATH [flags]",
		Short: "Boot a guest kernel",
		Example: `  # Boot a kernel with an initramfs and 1 GiB of RAM
  govm run --kernel bzImage --initrd initrd.cpio.gz -m 1G

  # Add to the kernel command line and use two vCPUs
  govm run --kernel bzImage -p "root=/dev/vda rw" --disk rootfs.ext4 -c 2

  # Let the guest choose govm's exit status (port 0x501, like QEMU's isa-debug-exit)
  govm run --kernel guest/build/bzImage -p test=boot --debug-exit

  # A network device on a new tap with the host side at 10.0.2.1
  govm run --kernel bzImage --initrd initrd --net tap,host-ip=10.0.2.1/24

  # Run a command on the host's files, in the current directory, and exit
  # with its status (like vng -- CMD)
  govm run -k arch/x86/boot/bzImage -- make -C tools/testing/selftests run_tests

  # Quit an interactive console: Ctrl-A x`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return fmt.Errorf("unexpected argument %q: flags come first, and a command to run goes after --", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.command = args
			return runVM(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.kernel, "kernel", "k", "", "kernel image: bzImage or ELF vmlinux (default: ./bzImage, ./arch/x86/boot/bzImage or /boot/vmlinuz-$(uname -r))")
	fl.StringVarP(&f.initrd, "initrd", "i", "", "initial ramdisk to load")
	fl.StringVarP(&f.params, "params", "p", "", "kernel command line, appended to govm's defaults")
	fl.BoolVar(&f.noDefaultParams, "no-default-params", false, "do not prepend govm's default command line ("+vmm.KernelParams+")")
	fl.StringVarP(&f.mem, "mem", "m", "512M", "guest RAM size, with K/M/G/T suffix (a bare number is MiB)")
	fl.IntVarP(&f.cpus, "cpus", "c", 1, "number of vCPUs")
	fl.StringVar(&f.name, "name", "", "VM name (default guest-<pid>)")
	fl.StringVar(&f.apiSocket, "api-socket", "", "control socket PATH, or none (default "+api.Dir()+"/NAME.sock; see docs/api.md)")
	fl.StringVar(&f.watchdog, "watchdog", "1s", "lost-notification watchdog: report a lost kick/interrupt, stuck ISR or RX starvation that lasts this long, or off")
	fl.BoolVar(&f.watchdogRecover, "watchdog-recover", false, "when the watchdog finds a lost kick or interrupt, kick the queue or raise the interrupt again")
	fl.BoolVar(&f.debugExit, "debug-exit", false, "let the guest end govm with status (v<<1)|1 by writing v to port 0x501")
	fl.StringVar(&f.pollMax, "poll-max", defaultPollMax, "longest a virtio device's I/O thread busy-polls its queues before it sleeps, adapting to the guest's pace (like QEMU's poll-max-ns), or 0 for off")
	fl.StringVar(&f.console, "console", "serial", "the guest's console: serial (COM1, ttyS0, from the first line) or virtio (a virtio-console, hvc0: a buffer per exit, not a byte; early boot messages still go to the serial port)")
	fl.StringVar(&f.rootfs, "rootfs", "/", "with a command after --: the directory the guest runs it in as its root (read-only, with a writable tmpfs over it)")
	fl.BoolVar(&f.noRNG, "no-rng", false, "do not add the virtio-rng entropy device (the guest's /dev/hwrng, fed from the host's getrandom)")
	fl.StringVar(&f.rngRate, "rng-rate", "0", "most entropy bytes per second the guest gets from virtio-rng, with K/M/G suffix (1M/s), or 0 for no limit")
	fl.BoolVar(&f.stats, "stats", false, "print each virtio device's queue counters when the VM ends (also on SIGUSR1 at any time)")
	fl.StringArrayVarP(&f.disks, "disk", "d", nil, "virtio-blk disk image PATH[,ro][,serial=ID][,event-idx=off][,indirect=off] (repeatable)")
	fl.StringArrayVar(&f.shares, "share", nil, "a host directory the guest mounts over virtio-9p: HOSTDIR[,tag=NAME][,ro] (repeatable; the tag defaults to the directory's name; in the guest: mount -t 9p -o trans=virtio,version=9p2000.L NAME /mnt)")
	fl.StringArrayVarP(&f.nets, "net", "n", nil, "virtio-net device: tap[,ifname=NAME][,host-ip=ADDR/PREFIX][,mac=MAC][,event-idx=off][,indirect=off][,mrg-rxbuf=off] or none (repeatable)")
	fl.StringVar(&f.seccomp, "seccomp", seccompDefault(), "system call filter while the VM runs: on, off, or audit (log what the filter would refuse)")
	addSmokeFlags(fl, &f.smoke)
	return cmd
}

func runVM(cmd *cobra.Command, f *runFlags) (err error) {
	start := time.Now()
	stderr := newMsgWriter()
	// Hidden, for performance work: GOVM_CPUPROFILE=path writes a pprof
	// CPU profile of the whole run (go tool pprof bin/govm path).
	if path := os.Getenv("GOVM_CPUPROFILE"); path != "" {
		if pf, err := os.Create(path); err == nil && pprof.StartCPUProfile(pf) == nil {
			defer func() { pprof.StopCPUProfile(); pf.Close() }()
		}
	}
	cfg, err := configFromFlags(f, stderr)
	if err != nil {
		return usageError{err}
	}
	// Every file and descriptor of the smoke-test features is opened
	// here, before the VM runs.
	sm, err := newSmoke(&f.smoke, start)
	if err != nil {
		return usageError{err}
	}
	defer sm.close()
	// Whatever fails from here on, --result gets its verdict (finish
	// writes the one of a VM that ran; setupFailed then does nothing).
	defer func() {
		if err != nil {
			sm.setupFailed(err, exitStatus(err, true))
		}
	}()
	// The guest's console reaches stdout through a queue: a vCPU printing
	// never waits for whoever reads stdout (internal/outq).
	console := sm.console(outq.New(os.Stdout, consoleQueueMax))
	cfg.Stdout = console
	cfg.Log = stderr
	if term.IsTerminal(int(os.Stdin.Fd())) {
		cfg.Stdin = os.Stdin
	} else if st, err := os.Stdin.Stat(); err == nil && st.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) != 0 {
		cfg.Stdin = os.Stdin
	}

	sbMode, err := sandbox.ParseMode(f.seccomp)
	if err != nil {
		return usageError{fmt.Errorf("--seccomp: %w", err)}
	}

	// The socket first: a second VM of the same name must fail before it
	// creates anything (a tap is named after the VM).
	sockPath, err := listenAPI(f.apiSocket, cfg.Name)
	if err != nil {
		return usageError{err}
	}
	var ln *net.UnixListener
	var sock *api.Socket
	if sockPath != "" {
		if ln, sock, err = api.Listen(sockPath, f.apiSocket == ""); err != nil {
			switch {
			case errors.Is(err, api.ErrInUse):
				return usageError{fmt.Errorf("a VM named %q is already running (%s); choose another --name", cfg.Name, sockPath)}
			case f.apiSocket != "":
				return usageError{fmt.Errorf("--api-socket: %w", err)}
			}
			// The default place is not usable here (a read-only /run
			// in a container): the VM runs, only without its API.
			fmt.Fprintf(stderr, "govm: warning: no API socket (%v); govm list/stat/pause/stop will not see this VM (--api-socket PATH picks another place)\n", oneLine(err.Error()))
			ln = nil
		}
	}

	m, err := vmm.New(cfg)
	if err != nil {
		if ln != nil {
			ln.Close()
			sock.Close()
		}
		return err
	}
	if ln == nil {
		defer m.Close()
	} else {
		srv := api.Serve(ln, apiVM{Machine: m, socket: sockPath})
		// The server stops before the machine is freed; the socket
		// file goes last, after the devices are closed: govm stop
		// waits for it. Until then the name stays this VM's.
		defer func() {
			srv.Close()
			m.Close()
			sock.Close()
		}()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// SIGUSR1 asks what the queues are doing, e.g. when a guest seems stuck.
	// The printer is joined before m.Close (deferred above, so it runs
	// after this) unmaps guest RAM; m.DeviceStats also answers nothing
	// once closed. A SIGUSR1 after the join fills the channel and is
	// dropped.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	statsQuit, statsDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(statsDone)
		for {
			select {
			case <-usr1:
				printStats(m)
			case <-statsQuit:
				return
			}
		}
	}()
	defer func() {
		close(statsQuit)
		<-statsDone
	}()
	if err := startSandbox(sbMode, ln, sock, cfg.Shares, m.ShareRoots()); err != nil {
		return err
	}
	sm.run(m)
	res := m.Run(ctx)
	sm.stopAlarms() // no timeout or grace stop once the VM has ended
	// The guest's last output goes out while a reader takes it; a
	// stalled one does not keep govm from ending (finish says what was
	// left unwritten).
	console.closeOut(outputIdle, outputMost)
	if f.stats {
		printStats(m)
	}
	return sm.finish(res, m, f.kernel, console, stderr)
}

// configFromFlags turns the flags into a vmm.Config. It checks syntax only:
// what the values mean (a --cpus or --mem in range, a disk serial that
// fits) is checked once, by vmm.New. Every error is bad input.
func configFromFlags(f *runFlags, stderr io.Writer) (vmm.Config, error) {
	if f.kernel == "" {
		k, err := findKernel()
		if err != nil {
			return vmm.Config{}, err
		}
		fmt.Fprintf(stderr, "govm: no --kernel given: using %s (searched %s)\n", k, strings.Join(kernelSearchPath(), ", "))
		f.kernel = k
	}
	if len(f.command) > 0 {
		if err := hostCommand(f); err != nil {
			return vmm.Config{}, err
		}
	}
	if f.smoke.exec != "" && f.initrd == "" {
		initrd, err := defaultGuestInitrd()
		if err != nil {
			return vmm.Config{}, err
		}
		f.initrd = initrd
	}
	mem, err := size.Parse(f.mem)
	if err != nil {
		return vmm.Config{}, fmt.Errorf("--mem: %w", err)
	}
	cfg := vmm.Config{
		Name:      f.name,
		Kernel:    f.kernel,
		Initrd:    f.initrd,
		Params:    f.params,
		MemSize:   mem,
		CPUs:      f.cpus,
		DebugExit: f.debugExit,
		KVMPath:   os.Getenv("GOVM_KVM_DEVICE"),
		// A decompressed distro kernel is kept for the next boot.
		KernelCacheDir: vmm.DefaultKernelCacheDir(),
		Stdout:         os.Stdout,
		Log:            stderr,
		PVPanic:        !f.smoke.noPVPanic,
		RNG:            !f.noRNG,
	}
	if cfg.RNGRate, err = parseRate(f.rngRate); err != nil {
		return vmm.Config{}, err
	}
	if f.smoke.exec != "" {
		cfg.Params = strings.TrimSpace(cfg.Params + " " + execParams(f.smoke.exec))
		cfg.DebugExit, cfg.ExecStatus = true, true
	}
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("guest-%d", os.Getpid())
	}
	if f.watchdog != "off" {
		d, err := time.ParseDuration(f.watchdog)
		if err != nil || d <= 0 {
			return vmm.Config{}, fmt.Errorf("--watchdog %q: want a duration such as 1s or 250ms, or off", f.watchdog)
		}
		cfg.Watchdog = d
	}
	cfg.WatchdogRecover = f.watchdogRecover
	if cfg.PollMax, err = parsePollMax(f.pollMax); err != nil {
		return vmm.Config{}, err
	}
	if cfg.Faults, err = parseFaults(os.Getenv("GOVM_FAULTS")); err != nil {
		return vmm.Config{}, err
	}
	switch f.console {
	case "serial":
	case "virtio":
		cfg.VirtioConsole = true
	default:
		return vmm.Config{}, fmt.Errorf("--console %q: want serial or virtio", f.console)
	}
	if !f.noDefaultParams {
		cfg.DefaultParams = vmm.KernelParams
		if cfg.VirtioConsole {
			cfg.DefaultParams = vmm.VirtioConsoleParams(cfg.DefaultParams)
		}
		cfg.HostParams = true
	}
	for _, s := range f.shares {
		sc, err := parseShare(s)
		if err != nil {
			return vmm.Config{}, err
		}
		cfg.Shares = append(cfg.Shares, sc)
	}
	if err := checkShareTags(cfg.Shares); err != nil {
		return vmm.Config{}, err
	}
	for _, d := range f.disks {
		dc, err := parseDisk(d)
		if err != nil {
			return vmm.Config{}, err
		}
		cfg.Disks = append(cfg.Disks, dc)
	}
	for _, n := range f.nets {
		nc, err := parseNet(n)
		if err != nil {
			return vmm.Config{}, err
		}
		cfg.Nets = append(cfg.Nets, nc)
	}
	return cfg, nil
}

func printStats(m *vmm.Machine) {
	w := newMsgWriter()
	if s, ok := m.Startup(); ok {
		fmt.Fprintf(w, "govm: stats: %s\n", s)
	}
	for _, l := range m.DeviceStats() {
		fmt.Fprintf(w, "govm: stats: %s\n", l)
	}
}

// consoleQueueMax bounds the guest's console output waiting for stdout's
// reader: a reader this far behind has stalled, and what does not fit is
// dropped and counted (--console-log still gets it all).
const consoleQueueMax = 1 << 20

// defaultPollMax is --poll-max's default: long enough to cover a guest's
// turnaround at queue depth 1 when its interrupt handler runs in KVM's
// instruction emulator (150-250 us on our CI hosts), which is where the
// polling pays most; a native guest turns around in microseconds, and the
// window adapts down to that (virtio.Poller).
const defaultPollMax = "256us"

// maxPollMax bounds --poll-max: a thread spinning longer than this between
// requests would cost more CPU than any wakeup it saves.
const maxPollMax = 10 * time.Millisecond

// parseRate parses --rng-rate: bytes per second, a bare number or with a
// K/M/G suffix (powers of 1024), an optional "/s"; 0 for no limit.
func parseRate(s string) (uint64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	if t == "0" {
		return 0, nil
	}
	if v, err := strconv.ParseUint(t, 10, 64); err == nil {
		return v, nil // bare: bytes
	}
	v, err := size.Parse(t)
	if err != nil || !strings.ContainsAny(strings.ToUpper(t), "KMGT") {
		return 0, fmt.Errorf("--rng-rate %q: want bytes per second such as 4096, 64K or 1M/s, or 0 for no limit", s)
	}
	return v, nil
}

// parsePollMax parses --poll-max: a duration (0 for off) up to maxPollMax.
func parsePollMax(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxPollMax {
		return 0, fmt.Errorf("--poll-max %q: want a duration from 0 (off) to %v, such as 256us", s, maxPollMax)
	}
	return d, nil
}

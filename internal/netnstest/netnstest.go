// Package netnstest gives tests and benchmarks network namespaces of their
// own, so no frame they send ever leaves the machine's loopback or the
// namespace: create one (deleted when the test ends) and run code inside it.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netns"
)

// The test network, one /24 per namespace: the guest's address (the test
// kernel's net.ip) and the host side's, on the tap (govm's --net host-ip,
// the kernel's net.peer). Every namespace is its own world, so all tests and
// benchmarks use the same two.
const (
	GuestIP = "10.0.2.15"
	HostIP  = "10.0.2.1"
)

var seq atomic.Int32

// New creates a namespace named prefix-PID-N with lo up and deletes it (and
// every interface left in it, such as a tap) when tb ends.
func New(tb testing.TB, prefix string) (string, error) {
	tb.Helper()
	ns := fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), seq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return "", fmt.Errorf("netnstest: ip netns add %s: %w: %s", ns, err, out)
	}
	tb.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			tb.Errorf("netnstest: ip netns del %s: %v: %s", ns, err, out)
		}
	})
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return "", fmt.Errorf("netnstest: lo up in %s: %w: %s", ns, err, out)
	}
	return ns, nil
}

// Do runs fn on an OS thread switched into ns: sockets fn creates belong to
// ns for their whole life, whichever thread uses them later. The thread is
// never unlocked, so Go retires it instead of reusing it elsewhere.
func Do(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromName(ns)
		if err != nil {
			errc <- fmt.Errorf("netnstest: %s: %w", ns, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("netnstest: entering %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	virtiopci "github.com/govm/govm/virtio/pci"
)

// parseFaults reads GOVM_FAULTS, the contributors' switch for injecting
// lost notifications into every virtio device, to prove the watchdog
// (docs/usage.md): "drop-irq=N,drop-kick=N,delay-irq=DURATION,delay-kick=DURATION", any
// subset; empty means none.
func parseFaults(s string) (virtiopci.Faults, error) {
	var f virtiopci.Faults
	if s == "" {
		return f, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "drop-irq":
			f.DropInterrupt, err = strconv.ParseUint(v, 10, 64)
		case "drop-kick":
			f.DropKick, err = strconv.ParseUint(v, 10, 64)
		case "delay-irq":
			f.DelayInterrupt, err = time.ParseDuration(v)
		case "delay-kick":
			f.DelayKick, err = time.ParseDuration(v)
		default:
			err = fmt.Errorf("unknown fault %q", k)
		}
		if err != nil {
			return f, fmt.Errorf("GOVM_FAULTS %q: %v (want drop-irq=N,drop-kick=N,delay-irq=DURATION,delay-kick=DURATION)", s, err)
		}
	}
	return f, nil
}

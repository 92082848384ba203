package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/govm/govm/tap"
	virtionet "github.com/govm/govm/virtio/net"
	"github.com/govm/govm/vmm"
)

// errNetFlag: a --net value govm does not understand.
var errNetFlag = errors.New("bad --net value")

// parseNet parses "none" or "tap[,ifname=NAME][,host-ip=ADDR/PREFIX]
// [,mac=MAC]". Every error is one line naming the bad part.
func parseNet(s string) (vmm.NetConfig, error) {
	parts := strings.Split(s, ",")
	switch parts[0] {
	case "none":
		if len(parts) > 1 {
			return vmm.NetConfig{}, fmt.Errorf("%w %q: none takes no options", errNetFlag, s)
		}
		return vmm.NetConfig{Mode: vmm.NetNone}, nil
	case "tap":
	default:
		return vmm.NetConfig{}, fmt.Errorf("%w %q: want none or tap[,ifname=NAME][,host-ip=ADDR/PREFIX][,mac=MAC]", errNetFlag, s)
	}
	cfg := vmm.NetConfig{Mode: vmm.NetTap}
	seen := map[string]bool{}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok || v == "" {
			return vmm.NetConfig{}, fmt.Errorf("%w %q: option %q is not key=value", errNetFlag, s, p)
		}
		if seen[k] {
			return vmm.NetConfig{}, fmt.Errorf("%w %q: %s given twice", errNetFlag, s, k)
		}
		seen[k] = true
		off, isSwitch, err := vmm.FeatureSwitch(true, k, v)
		if isSwitch {
			if err != nil {
				return vmm.NetConfig{}, fmt.Errorf("%w %q: %w", errNetFlag, s, err)
			}
			cfg.Withhold |= off
			continue
		}
		switch k {
		case "ifname":
			err = tap.ValidName(v)
			cfg.IfName = v
		case "host-ip":
			cfg.HostIP, err = tap.ParseHostIP(v)
		case "mac":
			cfg.MAC, err = virtionet.ParseMAC(v)
		default:
			return vmm.NetConfig{}, fmt.Errorf("%w %q: unknown option %q (want ifname, host-ip, mac, or a feature switch: %s)", errNetFlag, s, k, vmm.FeatureSwitchNames(true))
		}
		if err != nil {
			return vmm.NetConfig{}, fmt.Errorf("%w: %w", errNetFlag, err)
		}
	}
	return cfg, nil
}

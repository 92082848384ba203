package vmm

import (
	"fmt"
	"sort"
	"strings"

	"github.com/govm/govm/virtio"
	virtionet "github.com/govm/govm/virtio/net"
)

// Feature switches of --disk and --net: NAME=off withholds the feature
// bit from the device's offer, as QEMU's device properties (event_idx,
// indirect_desc, mrg_rxbuf) do, so a guest driver can be run down its
// other paths: without EVENT_IDX Linux's virtio_ring writes
// VRING_AVAIL_F_NO_INTERRUPT instead of used_event; without mergeable
// buffers virtio_net posts big or small receive buffers.
var (
	ringSwitches = map[string]uint{
		"event-idx": virtio.FeatureRingEventIdx,
		"indirect":  virtio.FeatureRingIndirectDesc,
	}
	netSwitches = map[string]uint{
		"mrg-rxbuf": virtionet.FeatureMrgRxBuf,
	}
)

// FeatureSwitch parses one feature switch of a --disk (net false) or
// --net (net true) value: ok says whether name is one; withhold is the
// bit to withhold (0 for "on").
func FeatureSwitch(net bool, name, value string) (withhold uint64, ok bool, err error) {
	bit, ok := ringSwitches[name]
	if !ok && net {
		bit, ok = netSwitches[name]
	}
	if !ok {
		return 0, false, nil
	}
	switch value {
	case "on":
		return 0, true, nil
	case "off":
		return virtio.Bit(bit), true, nil
	}
	return 0, true, fmt.Errorf("%s=%s: want %s=on or %s=off", name, value, name, name)
}

// FeatureSwitchNames lists the switch names of --disk or --net, sorted.
func FeatureSwitchNames(net bool) string {
	var names []string
	for n := range ringSwitches {
		names = append(names, n)
	}
	if net {
		for n := range netSwitches {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

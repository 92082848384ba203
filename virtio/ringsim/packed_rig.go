package ringsim

import (
	"github.com/govm/govm/guestmem"
	"github.com/govm/govm/virtio"
	"github.com/govm/govm/virtio/vring"
)

// packedRing lays out a packed ring at ringBase (spec 2.8) with its event
// suppression areas each on a page of its own, as Linux allocates them
// (vring_alloc_queue_packed: three DMA-coherent allocations).
func packedRing(s Scenario, cfg vring.Config, features uint64) ([]Field, virtio.Steps, func(*guestmem.Memory) DriverSide) {
	ring := uint64(ringBase)
	end := ring + 16*uint64(s.Size)
	driverEv := (end + 2*virtio.LegacyAlign - 1) &^ (virtio.LegacyAlign - 1)
	deviceEv := driverEv + virtio.LegacyAlign
	fields := []Field{
		{"descriptor ring", ring, end},
		{"driver event", driverEv, driverEv + 4},
		{"device event", deviceEv, deviceEv + 4},
	}
	q := virtio.NewPackedQueue(s.Size)
	q.DescAddr, q.DriverAddr, q.DeviceAddr, q.Ready = ring, driverEv, deviceEv, true
	q.SetFeatures(features)
	return fields, virtio.PackedSteps(q), func(m *guestmem.Memory) DriverSide {
		return vring.NewPacked(m, cfg, ring, driverEv, deviceEv)
	}
}

package vmm

import (
	"github.com/govm/govm/api"
	"github.com/govm/govm/stall"
)

// startWatchdog starts the lost-notification watchdog when configured and
// returns its stop function (nil when off).
func (m *Machine) startWatchdog() func() {
	if m.cfg.Watchdog <= 0 || len(m.slots) == 0 {
		return nil
	}
	cfg := stall.Config{
		T:      m.cfg.Watchdog,
		Sample: m.watchSample,
		Report: func(r stall.Report) { m.logf("%s", r) },
	}
	if m.cfg.WatchdogRecover {
		cfg.Recover = m.recover
	}
	wd := stall.New(cfg)
	if err := wd.Run(); err != nil {
		m.logf("%v; running without it", err)
		return nil
	}
	m.wd.Store(wd)
	return wd.Stop
}

// watchSample is the watchdog's view of every enabled queue. Not ok while
// paused or stopping: a guest that cannot run cannot be blamed.
func (m *Machine) watchSample(dst []stall.Queue) ([]stall.Queue, bool) {
	if m.State() != api.StateRunning {
		return dst, false
	}
	m.closeMu.RLock()
	defer m.closeMu.RUnlock()
	if m.closed {
		return dst, false
	}
	for i, sl := range m.slots {
		ts := sl.dev.Stats()
		work := ts.ISRReads
		for _, q := range ts.Queues {
			work += uint64(q.AvailIdx)
		}
		for _, q := range ts.Queues {
			if !q.Enabled {
				continue
			}
			wq := stall.Queue{Device: sl.what, Slot: i, Queue: q,
				ISR: ts.ISR, ISRReads: ts.ISRReads, DriverWork: work}
			if q.NeedBuffers {
				if p, ok := sl.backend.(interface{ Pending() bool }); ok {
					wq.RXPending = p.Pending()
				}
			}
			dst = append(dst, wq)
		}
	}
	return dst, true
}

// recover repairs what a report found (--watchdog-recover): a lost kick by
// kicking the queue, so its device re-checks the ring; a lost interrupt by
// raising it again. The other kinds are the driver's or the host's to fix.
func (m *Machine) recover(r stall.Report) {
	if r.Queue.Slot < 0 || r.Queue.Slot >= len(m.slots) {
		return
	}
	sl, q := m.slots[r.Queue.Slot], r.Queue.Index
	switch r.Kind {
	case stall.LostKick:
		sl.dev.KickQueue(q)
	case stall.LostInterrupt:
		sl.dev.Reraise(q)
	default:
		return
	}
	m.logf("watchdog: recovering %s on %s queue %d", r.Kind, sl.what, q)
}

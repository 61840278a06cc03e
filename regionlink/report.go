package regionlink

import (
	"context"
	"sync"

	"github.com/weirhq/weir/region"
)

// Run reports this node's demand on its global keys to their home regions
// every Shares.Interval, applies the grants that come back, and forgets
// idle keys and expired grants, until ctx ends. Run it once, for the life
// of the node.
func (l *Link) Run(ctx context.Context) error {
	t := l.clk.NewTicker(l.cfg.Shares.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
			l.Round(ctx)
		}
	}
}

// mono is the time since New in nanoseconds, what the Member and the Home
// are timed on.
func (l *Link) mono() int64 { return int64(l.clk.Since(l.start)) }

// Round runs one reporting round: it closes the current demand interval,
// sends one report per home region (its own region's to itself, without
// the network) and applies the replies that arrive within CallTimeout. It
// returns when every report has been answered or given up on.
func (l *Link) Round(ctx context.Context) {
	mono := l.mono()
	demand := l.rollDemand(mono)
	l.memberMu.Lock()
	reps, err := l.member.Reports(mono, demand)
	l.memberMu.Unlock()
	if err != nil { // demands are computed here, never negative
		l.logger.Error("region report not built", "err", err)
		return
	}
	var wg sync.WaitGroup
	for _, rep := range reps {
		wg.Go(func() { l.deliver(ctx, rep) })
	}
	wg.Wait()
	l.homeMu.Lock()
	l.home.Sweep(l.mono())
	l.homeMu.Unlock()
}

// deliver sends rep to its home and applies the reply.
func (l *Link) deliver(ctx context.Context, rep region.Report) {
	cctx, cancel := context.WithTimeout(ctx, l.cfg.CallTimeout)
	defer cancel()
	var (
		reply region.Reply
		err   error
	)
	if rep.Home == l.cfg.Region {
		reply, err = l.Handle(cctx, rep, false)
	} else {
		reply, err = l.deps.Sender.Send(cctx, l.cfg.Peers[rep.Home], rep, false)
	}
	if err != nil {
		l.metrics.reports.WithLabelValues(rep.Home, "failed").Inc()
		l.logger.Debug("region report failed; shares stand until their grants expire", "home", rep.Home, "err", err)
		return
	}
	l.memberMu.Lock()
	n, err := l.member.Apply(l.mono(), reply)
	l.memberMu.Unlock()
	if err != nil {
		l.metrics.reports.WithLabelValues(rep.Home, "misaddressed").Inc()
		l.logger.Warn("region reply refused", "home", rep.Home, "err", err)
		return
	}
	l.metrics.reports.WithLabelValues(rep.Home, "ok").Inc()
	l.metrics.applied.Add(float64(n))
}

// rollDemand closes the current interval of every key's offered units and
// returns each key's demand over the last second (the last window
// intervals) as a fraction of its global rate, for the keys with any. It
// forgets keys idle for two TTLs: their next decision takes them to be at
// the floor, which never overstates their level.
func (l *Link) rollDemand(mono int64) map[string]float64 {
	span := float64(int64(l.window) * l.cfg.Shares.Interval.Nanoseconds())
	idle := 2 * l.cfg.Shares.TTL.Nanoseconds()
	out := make(map[string]float64)
	for i := range l.stripes {
		st := &l.stripes[i]
		st.mu.Lock()
		for k, ks := range st.keys {
			ks.pos = (ks.pos + 1) % len(ks.hist)
			ks.hist[ks.pos], ks.offered = ks.offered, 0
			var sum int64
			for _, v := range ks.hist {
				sum += v
			}
			switch {
			case sum > 0:
				// units per ns × ns per unit of the global limit
				out[k] = float64(sum) * float64(ks.global.Interval) / span
			case mono-ks.used > idle:
				delete(st.keys, k)
			}
		}
		st.mu.Unlock()
	}
	return out
}

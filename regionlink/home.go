package regionlink

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weirhq/weir/region"
)

// Handle answers a report as a node of its home region: this node grants
// the keys it owns (region.Home.Handle) and, unless the report was itself
// forwarded, passes the other keys to their owners in this region and
// merges their grants into the reply. A key whose owner is unknown or does
// not answer in time gets no grant this round. It returns an error
// wrapping region.ErrInvalidReport, and changes nothing, for a report that
// is malformed, too large, or not for this region.
func (l *Link) Handle(ctx context.Context, r region.Report, forwarded bool) (region.Reply, error) {
	if err := l.check(r); err != nil {
		return region.Reply{}, err
	}
	local := r
	local.Items = nil
	remote := make(map[string][]region.Demand)
	for _, it := range r.Items {
		group, _ := l.deps.Group(it.Key)
		switch addr, mine := l.deps.Owners.RegionOwner(group); {
		case mine:
			local.Items = append(local.Items, it)
		case addr != "" && !forwarded:
			remote[addr] = append(remote[addr], it)
		}
	}
	reply := region.Reply{Home: l.cfg.Region, To: r.From, Reporter: r.Reporter, Seq: r.Seq}
	var mu sync.Mutex
	var wg sync.WaitGroup
	fctx, cancel := forwardContext(ctx)
	defer cancel()
	for addr, items := range remote {
		part := r
		part.Items = items
		wg.Go(func() {
			got, err := l.deps.Sender.Send(fctx, addr, part, true)
			if err != nil || got.To != r.From || got.Reporter != r.Reporter || got.Seq != r.Seq {
				l.logger.Debug("region report part not answered by its owner", "owner", addr, "err", err)
				return
			}
			mu.Lock()
			reply.Grants = append(reply.Grants, got.Grants...)
			mu.Unlock()
		})
	}
	if len(local.Items) > 0 {
		l.homeMu.Lock()
		got, err := l.home.Handle(l.mono(), local)
		l.homeMu.Unlock()
		if err != nil { // check passed: only a bug gets here
			return region.Reply{}, err
		}
		l.countGrants(got.Grants)
		mu.Lock()
		reply.Grants = append(reply.Grants, got.Grants...)
		mu.Unlock()
	}
	wg.Wait()
	return reply, nil
}

// check refuses what region.Home would, and reports over this node's
// bounds.
func (l *Link) check(r region.Report) error {
	switch {
	case len(r.Items) > l.cfg.MaxItems:
		return fmt.Errorf("%w: %d keys exceed the limit of %d", region.ErrInvalidReport, len(r.Items), l.cfg.MaxItems)
	case len(r.From) > l.cfg.MaxKeyBytes || len(r.Reporter) > l.cfg.MaxKeyBytes:
		return fmt.Errorf("%w: region or reporter name longer than %d bytes", region.ErrInvalidReport, l.cfg.MaxKeyBytes)
	}
	for _, it := range r.Items {
		if len(it.Key) > l.cfg.MaxKeyBytes {
			return fmt.Errorf("%w: key of %d bytes exceeds %d", region.ErrInvalidReport, len(it.Key), l.cfg.MaxKeyBytes)
		}
		if _, ok := l.deps.Group(it.Key); !ok {
			return fmt.Errorf("%w: key %q has no group", region.ErrInvalidReport, it.Key)
		}
	}
	return l.home.Check(r) // reads only configuration: no lock
}

// forwardContext leaves a quarter of ctx's remaining time for the reply to
// travel back from this node.
func forwardContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, d.Add(-time.Until(d)/4))
}

// RingChanged tells the Link that ownership in its region's ring changed:
// as a home it forgets the keys it no longer owns and grants keys it did
// not hold before nothing above the floors for TTL + Grace, since their
// previous owner may have granted them (region.Home.Moved). Call it after
// every ring change.
func (l *Link) RingChanged() {
	l.homeMu.Lock()
	defer l.homeMu.Unlock()
	l.home.Moved(l.mono(), func(key string) bool {
		group, _ := l.deps.Group(key)
		_, mine := l.deps.Owners.RegionOwner(group)
		return mine
	})
}

func (l *Link) countGrants(gs []region.Grant) {
	for _, g := range gs {
		name := l.deps.LimitName(g.Key)
		result := "above_floor"
		if g.Share <= l.cfg.Shares.Floor {
			result = "floor"
		}
		l.metrics.grants.WithLabelValues(label(name), result).Inc()
	}
}

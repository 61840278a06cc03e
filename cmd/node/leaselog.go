package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/leaselink"
	"github.com/weirhq/weir/owner"
	"github.com/weirhq/weir/peer"
)

// grantLog is the owner as the peer plane's handler, with every lease it
// grants logged at debug level: the key, the peer, the lease, its units and
// the key's TAT after the grant (Unix nanoseconds, the TATs' time base), so
// the granted units are the emission slots [tat - units×T, tat). The line is
// written after the owner stored the grant's TAT in Redis and before the
// answer leaves, so every grant a peer can spend is in the log of the owner
// that made it, even one SIGKILLed right after. An operator reads from it
// what each owner handed out; cmd/node's process test checks from it that
// a new owner never grants those slots again. Grants are rare (one per peer
// per hot key per lease TTL), and nothing is formatted unless debug logging
// is on. Safe for concurrent use, as the owner is.
type grantLog struct {
	peerOwner
	logger *slog.Logger
}

// peerOwner is what the peer plane serves: forwarded decisions (the
// owner) and lease refreshes (its grants).
type peerOwner interface {
	peer.Handler
	peer.LeaseHandler
}

// ownerSide is the owner and its lease grants as one peerOwner.
type ownerSide struct {
	*owner.Owner
	grants *leaselink.Grants
}

var _ peerOwner = ownerSide{}

// HandleLease answers r with the owner's grants.
func (s ownerSide) HandleLease(ctx context.Context, from string, r lease.Refresh) []peer.LeaseAnswer {
	return s.grants.HandleLease(ctx, from, r)
}

var _ peer.LeaseHandler = grantLog{}

// HandleLease answers r with the owner and logs its grants.
func (g grantLog) HandleLease(ctx context.Context, from string, r lease.Refresh) []peer.LeaseAnswer {
	out := g.peerOwner.HandleLease(ctx, from, r)
	if !g.logger.Enabled(ctx, slog.LevelDebug) {
		return out
	}
	for i, a := range out {
		if a.Err != nil || a.NotOwner != "" || a.Outcome != lease.Granted || i >= len(r.Items) {
			continue
		}
		g.logger.LogAttrs(ctx, slog.LevelDebug, "lease granted",
			slog.String("key", r.Items[i].Key), slog.String("peer", from), slog.Uint64("lease", a.Lease),
			slog.Int64("units", a.Units), slog.Int64("tat", a.TAT), slog.Duration("ttl", time.Duration(a.TTL)))
	}
	return out
}

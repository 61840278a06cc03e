package rlqstest

import (
	"context"
	"sync"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/memstore"
)

// Owner is one in-process owner of every key: a real lease.Grantor over a
// real memstore, answering lease refreshes as the node's owner does
// (grants under the key's lock, decisions on the Effective TAT). Its
// clock is injected, so tests run it with explicit times. It implements
// rlqs.Leases. Safe for concurrent use.
type Owner struct {
	mu  sync.Mutex // guards g; taken inside the key's memstore lock
	g   *lease.Grantor
	mem *memstore.Store
	now func() int64
	// Drop, when set, is asked before each refresh; true loses it (no
	// answer, the returns strand), as a lost RPC would.
	Drop func() bool
}

// NewOwner returns an owner whose ledger is named name, reading now
// (nanoseconds, the TATs' time base).
func NewOwner(name string, now func() int64) (*Owner, error) {
	g, err := lease.NewGrantor(lease.GrantorConfig{Name: name, Grace: lease.DefaultGrantorConfig().Grace})
	if err != nil {
		return nil, err
	}
	return &Owner{g: g, mem: memstore.New(memstore.DefaultConfig()), now: now}, nil
}

// Lease answers r for holder at the owner's now.
func (o *Owner) Lease(_ context.Context, holder string, r lease.Refresh) ([]lease.Answer, error) {
	if o.Drop != nil && o.Drop() {
		return nil, context.DeadlineExceeded
	}
	now := o.now()
	out := make([]lease.Answer, len(r.Items))
	for i, it := range r.Items {
		it.Peer = holder
		err := o.mem.UpdateAt(o.mem.Epoch(), it.Group, it.Key, now, func(tat int64, _ bool) (int64, error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			a, err := o.g.Grant(tat, now, it)
			out[i] = a
			return a.TAT, err
		})
		if err != nil {
			out[i] = lease.Answer{Outcome: lease.Busy}
		}
	}
	return out, nil
}

// Decide decides one unit on the key directly at the owner at now, on the
// key's Effective TAT, as every other caller of the key would.
func (o *Owner) Decide(group, key string, l gcra.Limit, now int64) bool {
	var res [1]gcra.Result
	r, err := o.mem.DecideAdjusted(context.Background(), o.mem.Epoch(), group, []string{key}, []gcra.Limit{l}, 1, now, res[:], func(_ string, tat int64) int64 {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.g.Effective(group, key, tat, now)
	})
	return err == nil && r.Allowed
}

// Stats returns the ledger's counts per limit.
func (o *Owner) Stats() map[string]lease.GrantorStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.g.Stats()
}

// Sweep folds the leases expired at now into their keys, as the node's
// sweep does, key by key under each key's lock.
func (o *Owner) Sweep(now int64) {
	o.mu.Lock()
	due := o.g.Due(now)
	o.mu.Unlock()
	for _, d := range due {
		_ = o.mem.UpdateAt(o.mem.Epoch(), d.Group, d.Key, now, func(tat int64, _ bool) (int64, error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			return o.g.Expire(d.Group, d.Key, tat, now), nil
		})
	}
}

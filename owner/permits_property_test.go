package owner

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/ticket"
)

// modelPermit is one permit of the naive model: live while now < expiry.
type modelPermit struct {
	id     [16]byte
	tok    []byte
	cost   int64
	expiry int64
}

type permitModel struct{ permits []*modelPermit }

func (m *permitModel) live(now int64) (held int64, live []*modelPermit) {
	for _, p := range m.permits {
		if p.expiry > now {
			held += p.cost
			live = append(live, p)
		}
	}
	return held, live
}

// retryAfter is the exact wait until cost fits in n, from the live permits.
func (m *permitModel) retryAfter(now, n, cost int64) int64 {
	held, live := m.live(now)
	slices.SortFunc(live, func(a, b *modelPermit) int { return int(a.expiry - b.expiry) })
	for _, p := range live {
		if held -= p.cost; held+cost <= n {
			return p.expiry - now
		}
	}
	return -1
}

// Random histories of acquire, release, renew, time passing and hand-offs
// between two owners over one Redis twin, checked step by step against a
// naive model: the owner admits exactly when the model has room (so never
// more than N live, across moves too), names the exact wait, and its
// releases and renewals are Done exactly for live permits.
func TestOwner_permits_propertyAgainstNaiveModel(t *testing.T) {
	const (
		n   = 4
		ttl = 2 * time.Second
	)
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed, 26))
		a, redis := newPermitPair(t, true, 0)
		b := newPermitOwner(t, "b", a.ring, a.clk, redis, 0)
		owners := map[string]*permitOwner{"a": a, "b": b}
		cur := "a"
		var model permitModel
		for step := range 80 {
			f := owners[cur]
			now := f.now()
			switch k := rng.IntN(10); {
			case k < 3:
				f.clk.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
			case k < 6:
				cost := int64(1 + rng.IntN(3))
				r, agg, _, err := f.acquire(t, n, ttl, cost, nil)
				held, _ := model.live(now)
				want := held+cost <= n
				if err != nil || agg.Allowed != want {
					t.Fatalf("seed %d step %d: acquire %d with %d held: %+v, %v; want allowed %v", seed, step, cost, held, agg, err, want)
				}
				if !want {
					if wait := model.retryAfter(now, n, cost); agg.RetryAfter != wait {
						t.Fatalf("seed %d step %d: retry after %d, model %d", seed, step, agg.RetryAfter, wait)
					}
					break
				}
				tk, err := ticket.Decode(r.Grant.Permit)
				if err != nil {
					t.Fatal(err)
				}
				model.permits = append(model.permits, &modelPermit{id: tk.ID, tok: r.Grant.Permit, cost: cost, expiry: now + ttl.Nanoseconds()})
			case k < 8 && len(model.permits) > 0:
				p := model.permits[rng.IntN(len(model.permits))]
				g, err := f.op(t, decide.OpRelease, p.tok, n, ttl, 0)
				if want := p.expiry > now; err != nil || g.Done != want {
					t.Fatalf("seed %d step %d: release: %+v, %v; want done %v", seed, step, g, err, want)
				}
				p.expiry = min(p.expiry, now)
			case k < 9 && len(model.permits) > 0:
				p := model.permits[rng.IntN(len(model.permits))]
				asked := []time.Duration{0, 500 * time.Millisecond, time.Second, 5 * time.Second}[rng.IntN(4)]
				g, err := f.op(t, decide.OpRenew, p.tok, n, ttl, asked)
				want := p.expiry > now
				if err != nil || g.Done != want {
					t.Fatalf("seed %d step %d: renew: %+v, %v; want done %v", seed, step, g, err, want)
				}
				if want {
					eff := asked
					if eff == 0 || eff > ttl {
						eff = ttl
					}
					p.expiry = now + eff.Nanoseconds()
					if g.Expiry != p.expiry {
						t.Fatalf("seed %d step %d: renewed to %d, model %d", seed, step, g.Expiry, p.expiry)
					}
				}
			default: // hand the group to the other owner
				next := map[string]string{"a": "b", "b": "a"}[cur]
				f.ring.move(next)
				f.o.Drop(t.Context(), func(string) bool { return true })
				cur = next
			}
			f = owners[cur]
			if got, _, _, ok := f.o.Permits("t1", concKey, f.now()); ok {
				if held, _ := model.live(f.now()); got != held || got > n {
					t.Fatalf("seed %d step %d: owner %s holds %d, model %d (N %d)", seed, step, cur, got, held, n)
				}
			}
		}
	}
}

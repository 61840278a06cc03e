package checker

import (
	"fmt"
	"maps"

	"slices"
	"sort"
	"time"

	"github.com/weirhq/weir/chaos/history"
)

// PermitSlack widens the "possibly held" life of a permit in the
// liveness check, for the owner's clock and sweep: an owner may count a
// permit up to this long past what the caller's times allow.
const PermitSlack = 250 * time.Millisecond

// ClockSlack shortens the "surely held" life of a permit near its expiry.
// Each node stamps the requests it receives with its own Redis-based
// clock (redisclock), within half a round trip of Redis TIME, so an owner
// may see a permit stamped by one node expire up to the two nodes' clock
// difference before the caller's wall clock says its TTL has passed.
const ClockSlack = 100 * time.Millisecond

// PermitResult is the permit check of one concurrency limit.
type PermitResult struct {
	// Granted counts admitted operations that got a permit; Crashed those
	// whose caller never released it; Released those released (answered
	// released: true); Renewed those renewed.
	Granted, Crashed, Released, Renewed int
	// MaxHeld is the most units surely held at once on one key, and
	// MaxHeldKey and MaxHeldAt where.
	MaxHeld    int64
	MaxHeldKey string
	MaxHeldAt  int64
	// Overheld counts instants (starts of a surely-held permit) above the
	// bound N × owners; Starved counts denials by the limit while its
	// possibly-held units left room for the request (slots that should
	// have come back did not), outside faults and their recovery.
	Overheld, Starved int
	// Unpermitted counts normal admissions that returned no permit.
	Unpermitted int
	// Judged counts the denials the liveness check judged.
	Judged int
}

// permitOp is one operation on a concurrency key, as the checks need it.
type permitOp struct {
	inv, comp int64
	cost      int64
	outcome   history.Outcome
	fb        bool
	denied    bool // this limit refused it
	life      *history.PermitLife
}

// sure is the interval in which a granted permit was certainly held at its
// owner: from the answer's arrival (the owner committed before it) to the
// earlier of the release's sending and the expiry the owner set at the
// earliest (the call's invoke + TTL, or a successful renew's invoke + TTL),
// less ClockSlack.
func (p permitOp) sure(ttl time.Duration) (s, e int64, ok bool) {
	if p.outcome != history.Allowed || p.fb || p.life == nil || !p.life.Granted {
		return 0, 0, false
	}
	e = p.inv + int64(ttl-ClockSlack)
	if p.life.Renewed {
		e = max(e, p.life.RenewInvoke+int64(ttl-ClockSlack))
	}
	if p.life.ReleaseInvoke > 0 {
		e = min(e, p.life.ReleaseInvoke)
	}
	return p.comp, e, e > p.comp
}

// possible is the interval in which the operation may have held slots at
// its owner: from its invoke until a successful release answered, or else
// until the latest expiry the owner can have set, plus PermitSlack.
// Unanswered calls may have acquired too, and so may calls a failure
// policy answered: a forward that timed out at the node the caller asked
// may have been committed at the owner (its slot then comes back at the
// TTL, as a crashed caller's). Normal denials hold nothing.
func (p permitOp) possible(ttl time.Duration) (s, e int64, ok bool) {
	switch {
	case p.outcome == history.Denied && !p.fb:
		return 0, 0, false
	case p.outcome == history.Allowed && !p.fb && (p.life == nil || !p.life.Granted):
		return 0, 0, false
	}
	e = p.comp + int64(ttl)
	if l := p.life; l != nil {
		if l.RenewInvoke > 0 {
			e = max(e, l.RenewComplete+int64(ttl))
		}
		if l.Released {
			e = min(e, l.ReleaseComplete)
		}
	}
	return p.inv, e + int64(PermitSlack), true
}

type edgeT struct {
	at    int64
	delta int64
}

// checkPermits judges a concurrency limit: at no instant may more than
// N units (N × a fault's owners while split ownership may last) be surely
// held on one key; and, outside faults and their recovery, no denial may
// come while the units possibly held left room for the request.
func (c *checker) checkPermits(ls *limitState) {
	res, spec := ls.res, ls.spec
	pr := &PermitResult{}
	res.Permits = pr
	keys := slices.Sorted(maps.Keys(ls.keys))
	res.Keys = len(keys)
	for _, k := range keys {
		ops := ls.keys[k].permits
		for _, p := range ops {
			if p.outcome == history.Allowed && !p.fb {
				switch l := p.life; {
				case l == nil || !l.Granted:
					pr.Unpermitted++
				default:
					pr.Granted++
					if l.Crashed {
						pr.Crashed++
					}
					if l.Released {
						pr.Released++
					}
					if l.Renewed {
						pr.Renewed++
					}
				}
			}
		}
		c.checkHeld(ls, k, ops, pr)
		c.checkStarved(ls, k, ops, pr)
	}
	if pr.Unpermitted > 0 {
		c.r.Violations = append(c.r.Violations, fmt.Sprintf("limit %q: %d normal admissions returned no permit", spec.Name, pr.Unpermitted))
	}
	res.Pass = pr.Overheld == 0 && pr.Starved == 0 && pr.Unpermitted == 0
}

// sweepEdges sorts edges (ends before starts at one instant: a permit
// released at t frees its slot for one granted at t).
func sweepEdges(edges []edgeT) {
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta
	})
}

func (c *checker) checkHeld(ls *limitState, key string, ops []permitOp, pr *PermitResult) {
	ttl := ls.spec.PermitTTL
	var edges []edgeT
	for _, p := range ops {
		if s, e, ok := p.sure(ttl); ok {
			edges = append(edges, edgeT{s, p.cost}, edgeT{e, -p.cost})
		}
	}
	sweepEdges(edges)
	var held int64
	for _, e := range edges {
		held += e.delta
		if e.delta <= 0 {
			continue
		}
		if held > pr.MaxHeld {
			pr.MaxHeld, pr.MaxHeldKey, pr.MaxHeldAt = held, key, e.at
		}
		_, owners, _ := c.allowance(ls, e.at, e.at, 0)
		if held > ls.spec.MaxInFlight*int64(owners) {
			if pr.Overheld++; pr.Overheld <= maxErrors {
				c.r.Violations = append(c.r.Violations, fmt.Sprintf("limit %q key %q: %d units of permits surely held at %.3fs, bound %d × %d owners",
					ls.spec.Name, key, held, secondsSince(e.at, c.r.Start), ls.spec.MaxInFlight, owners))
			}
		}
	}
}

func (c *checker) checkStarved(ls *limitState, key string, ops []permitOp, pr *PermitResult) {
	ttl := ls.spec.PermitTTL
	type iv struct{ s, e, cost int64 }
	var poss []iv
	for _, p := range ops {
		if s, e, ok := p.possible(ttl); ok {
			poss = append(poss, iv{s, e, p.cost})
		}
	}
	for _, p := range ops {
		if !p.denied || p.fb || p.outcome != history.Denied || c.inFault(p.inv, p.comp) {
			continue
		}
		pr.Judged++
		// The most units possibly held at any instant of [inv, comp]: the
		// decision came at one of them.
		var edges []edgeT
		for _, q := range poss {
			if q.s <= p.comp && q.e > p.inv {
				edges = append(edges, edgeT{max(q.s, p.inv), q.cost}, edgeT{q.e, -q.cost})
			}
		}
		sweepEdges(edges)
		var held, most int64
		for _, e := range edges {
			held += e.delta
			most = max(most, held)
		}
		if most+p.cost <= ls.spec.MaxInFlight {
			if pr.Starved++; pr.Starved <= maxErrors {
				c.r.Violations = append(c.r.Violations, fmt.Sprintf("limit %q key %q: denied at %.3fs while at most %d of %d units can have been held (slots not given back)",
					ls.spec.Name, key, secondsSince(p.inv, c.r.Start), most, ls.spec.MaxInFlight))
			}
		}
	}
}

// inFault reports whether [s, e] meets a fault or its recovery.
func (c *checker) inFault(s, e int64) bool {
	for _, f := range c.r.Faults {
		if f.overlaps(s, e, c.cfg.Recovery) {
			return true
		}
	}
	return false
}

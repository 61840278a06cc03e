package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/breaker"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/leaselink"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/owner"
	"github.com/weirhq/weir/peer"
)

// Config tunes a Router.
type Config struct {
	// Forward tunes how long a forward waits for a slow owner (budget.go).
	Forward ForwardConfig
}

// DefaultConfig returns DefaultForwardConfig's forward budget.
func DefaultConfig() Config { return Config{Forward: DefaultForwardConfig()} }

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error { return c.Forward.Validate() }

// Owner is this node's owner side (*owner.Owner): what the Router hands
// the requests, debts and drops of the groups this node owns.
type Owner interface {
	Decide(ctx context.Context, r *decide.Request, out []gcra.Result) (gcra.Result, error)
	ChargeDebt(ctx context.Context, r *decide.Request) peer.Result
	MayWait(group, key string, strict bool) bool
	Drop(ctx context.Context, lost func(key string) bool)
	OwnershipChanging()
	StartHeartbeat()
	StopHeartbeat()
	Beat(ctx context.Context)
	ThawRequests() <-chan struct{}
}

// Leases is the holder side of leases (*leaselink.Link): a request on
// leasable limits of a group another node owns may be decided from units
// this node holds instead of a forward.
type Leases interface {
	// Spend decides r from leases held for its route when it can, and
	// reports false when r must be forwarded as usual. b bounds a wait
	// for a refresh in flight.
	Spend(ctx context.Context, r *decide.Request, rt decide.Route, out []gcra.Result, b leaselink.Budgeter) (gcra.Result, bool)
	// NoteDenials remembers the owner's denials of a forwarded request.
	NoteDenials(r *decide.Request, out []gcra.Result)
}

var (
	_ Owner            = (*owner.Owner)(nil)
	_ Leases           = (*leaselink.Link)(nil)
	_ owner.Ring       = (*Routes)(nil)
	_ leaselink.Routes = (*Routes)(nil)
	_ owner.Leases     = (*leaselink.Grants)(nil)
)

// Deps are the parts a Router works with.
type Deps struct {
	// Routes is the ring and the members' addresses (NewRoutes).
	Routes *Routes
	// Forwarder sends work to other owners (peer.Client, or peertest).
	Forwarder peer.Forwarder
	// Owner decides the groups this node owns.
	Owner Owner
	// Leases, if set, decides leasable requests from leases held.
	Leases Leases
	// Breakers, if set, guard every forward (one breaker per peer
	// address), so a dead owner costs one fast failure instead of a
	// timeout per request.
	Breakers *breaker.Set
	// Clock measures forward budgets, round trips and debt scans; it must
	// be the clock contexts' deadlines are on. nil: clock.Real().
	Clock clock.Clock
}

// Router is the limiter's Store in a cluster: it routes each request once
// (Routes.Route), hands the groups this node owns to the Owner, spends
// leases held for the others (Leases), and forwards the rest to their
// owners, within budgets that tell a slow owner from a dead one. It
// records fallback debt and repays it once an owner answers, and applies
// membership changes. It holds no key state of its own beyond that debt.
type Router struct {
	cfg     Config
	deps    Deps
	routes  *Routes
	local   string
	clk     clock.Clock
	logger  *slog.Logger
	metrics *metrics
	// debts and debt account fallback debt; see debt.go.
	debts *debtTable
	debt  *prometheus.CounterVec
	rtt   rttTable   // owners' observed round trips (budget.go)
	mu    sync.Mutex // serialises SetMembers and Handoff
	// failed and cutOff (under mu) notice this node being on the small
	// side of a split; see rejoinedLocked.
	failed map[string]bool
	cutOff bool
}

var (
	_ limiter.Store          = (*Router)(nil)
	_ limiter.FallbackDebtor = (*Router)(nil)
	_ limiter.WaitHinter     = (*Router)(nil)
	_ leaselink.Budgeter     = (*Router)(nil)
)

// New returns a Router. Call SetMembers before the first decision; until
// then this node owns every group.
func New(cfg Config, deps Deps, logger *slog.Logger, reg prometheus.Registerer) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Routes == nil || deps.Forwarder == nil || deps.Owner == nil {
		return nil, errors.New("forward: routes, forwarder and owner are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	f := &Router{cfg: cfg, deps: deps, routes: deps.Routes, local: deps.Routes.Local(), clk: deps.Clock, logger: logger,
		metrics: m, debts: newDebtTable()}
	if f.debt, err = owner.DebtMetric(reg); err != nil {
		return nil, err
	}
	return f, nil
}

// Decide is the limiter's store: it routes r once, decides locally when
// this node owns r.Group, decides from leases when it can (never an op, a
// reservation or a request with a concurrency key), and otherwise
// forwards to the owner. When r.Grant is set it receives the owner's
// Grant before Decide returns. An op or acquire that fails with an
// UnavailableError may still have been applied at the owner (see the
// package doc, "Retries").
func (f *Router) Decide(ctx context.Context, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	rt := f.routes.Route(r.Group)
	if rt.Owner == f.local {
		agg, err := f.deps.Owner.Decide(ctx, r, out)
		if err == nil {
			f.repay(rt.Owner, r.Now)
		}
		return agg, err
	}
	if f.deps.Leases != nil && leasable(r) {
		if agg, ok := f.deps.Leases.Spend(ctx, r, rt, out, f); ok {
			return agg, nil
		}
	}
	it := forwardCopy(r)
	res, err := f.forward(ctx, rt, it)
	if err == nil && res.NotOwner != "" && res.NotOwner != rt.Owner {
		f.metrics.notOwner.Inc()
		if res.NotOwner == f.local {
			return f.deps.Owner.Decide(ctx, r, out)
		}
		res, err = f.forward(ctx, decide.Route{Owner: res.NotOwner, Addr: f.routes.Addr(res.NotOwner), Epoch: rt.Epoch}, it)
	}
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return gcra.Result{}, err
		}
		return gcra.Result{}, &limiter.UnavailableError{Reason: "owner_unreachable", Err: err}
	case res.NotOwner != "":
		return gcra.Result{}, &limiter.UnavailableError{Reason: "ownership_changing", Err: fmt.Errorf("owner of group %q is moving to %s", r.Group, res.NotOwner)}
	case res.Err != nil:
		reason := res.Reason
		if reason == "" {
			reason = "owner_failed"
		}
		return gcra.Result{}, &limiter.UnavailableError{Reason: reason, Err: res.Err}
	}
	if len(res.Results) != len(r.Keys) {
		return gcra.Result{}, fmt.Errorf("forward: owner answered %d results for %d limits", len(res.Results), len(r.Keys))
	}
	copy(out, res.Results)
	copyGrant(r, res.Grant)
	f.repay(rt.Owner, r.Now)
	if !res.Overall.Allowed && f.deps.Leases != nil {
		f.noteDenials(r, out)
	}
	return res.Overall, nil
}

// forwardCopy is what a forward of r carries. Copies: a forward that
// times out may still be queued or sent after Decide returns, and the
// limiter reuses r (limiter.Store). Like the wire, it carries no Defs (the
// owner fills them from its own policy) and no Grant (the owner answers
// its own, which Decide copies into r's: copyGrant).
func forwardCopy(r *decide.Request) decide.Request {
	it := decide.Request{Group: r.Group, Keys: slices.Clone(r.Keys), Limits: slices.Clone(r.Limits), Cost: r.Cost, Now: r.Now,
		Strict: r.Strict, Reserve: r.Reserve}
	if r.Op != nil {
		op := *r.Op
		it.Op = &op
	}
	return it
}

// copyGrant writes the owner's Grant g into r.Grant when the caller asked
// for one (a nil g, as the wire reads an empty Grant, is a zero Grant).
// Decide calls it before it returns, while the caller waits: an answer
// that arrives after that is dropped by the peer client and writes
// nowhere.
func copyGrant(r *decide.Request, g *decide.Grant) {
	if r.Grant == nil {
		return
	}
	*r.Grant = decide.Grant{}
	if g != nil {
		*r.Grant = *g
	}
}

// leasable reports whether r may be decided from leases: not an op, not a
// reservation (the owner keeps it), and no concurrency key (permits are
// held at the owner).
func leasable(r *decide.Request) bool {
	return r.Op == nil && !r.Reserve && !r.HasConcurrency()
}

// noteDenials tells the leases of the owner's denials of r's rate keys.
// An op answers no decision, and a concurrency key's RetryAfter is the
// wait for permits to expire, not a GCRA schedule: neither is noted.
func (f *Router) noteDenials(r *decide.Request, out []gcra.Result) {
	switch {
	case r.Op != nil:
		return
	case !r.HasConcurrency():
		f.deps.Leases.NoteDenials(r, out)
		return
	}
	rate := decide.Request{Group: r.Group, Cost: r.Cost, Now: r.Now}
	var rout []gcra.Result
	for i, k := range r.Keys {
		if d := r.Def(i); d == nil || !d.Concurrency {
			rate.Keys, rate.Limits, rate.Defs = append(rate.Keys, k), append(rate.Limits, r.Limits[i]), append(rate.Defs, d)
			rout = append(rout, out[i])
		}
	}
	if len(rate.Keys) > 0 {
		f.deps.Leases.NoteDenials(&rate, rout)
	}
}

// forward sends it to rt's owner within a budget derived from ctx and the
// owner's observed latency, and reports the outcome to the owner's
// breaker.
func (f *Router) forward(ctx context.Context, rt decide.Route, it decide.Request) (peer.Result, error) {
	addr := rt.Addr
	if addr == "" {
		return peer.Result{}, fmt.Errorf("forward: no address for owner %q", rt.Owner)
	}
	start := f.clk.Now()
	budget, callerBound := f.forwardBudget(ctx, addr, start)
	if budget <= 0 {
		return peer.Result{}, errNoTimeToForward
	}
	done, err := f.guard(addr)
	if err != nil {
		return peer.Result{}, fmt.Errorf("forward: owner %s: %w", rt.Owner, err)
	}
	// The deadline is fixed from start, so that a stall anywhere after it
	// shows up in took (and is excused), never as a forward that expired at
	// once or one that outlives its caller's deadline less the reserve.
	fctx, cancel := context.WithDeadline(ctx, start.Add(budget))
	defer cancel()
	res, err := f.deps.Forwarder.Decide(fctx, addr, it)
	done(f.forwardBlame(ctx, fctx, addr, err, f.clk.Since(start), budget, callerBound))
	return res, err
}

// Budget is how long a wait on the owner at addr may last now, for a
// caller under ctx: the forward budget (leaselink waits for a refresh in
// flight within it). It is leaselink.Budgeter.
func (f *Router) Budget(ctx context.Context, addr string) time.Duration {
	b, _ := f.forwardBudget(ctx, addr, f.clk.Now())
	return b
}

// guard asks the named breaker whether a call may be made. Without
// breakers every call may.
func (f *Router) guard(name string) (done func(error), err error) {
	if f.deps.Breakers == nil {
		return func(error) {}, nil
	}
	return f.deps.Breakers.Get(name).Allow()
}

// MayWait reports whether deciding key of group may wait on another
// process: the group belongs to another node (a forward), or its owner
// here says so (strict, or a load first). The limiter decides such
// requests of a batch concurrently. It is asked before Decide, per key,
// and so routes on its own: a hint (a wrong answer costs time, never
// correctness), not the request's route. Safe for concurrent use; no I/O.
func (f *Router) MayWait(group, key string, strict bool) bool {
	if f.routes.Owner(group) != f.local {
		return true
	}
	return f.deps.Owner.MayWait(group, key, strict)
}

// Members returns how many members this node currently sees, itself
// included; 1 before the first SetMembers (Routes.Members).
func (f *Router) Members() int { return f.routes.Members() }

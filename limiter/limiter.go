package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/policy"
)

// Store decides one composite request (a decide.Request: the keys' numbers
// and their limits' identities) atomically: out[i] receives limit i's
// result and the aggregate is returned. Decide must not keep req, its
// slices or out after it returns: the limiter reuses them (a forward that
// outlives its caller must copy what it sends). A store that cannot reach
// what it depends on returns an error wrapping *UnavailableError, which
// makes the limiter apply the limits' failure policy.
type Store interface {
	Decide(ctx context.Context, req *decide.Request, out []gcra.Result) (gcra.Result, error)
}

// UnavailableError says a dependency (Redis, the owner node) could not
// decide. Reason is a short label for metrics and the response:
// "redis_unavailable", "owner_unreachable", "state_load_failed", ...
type UnavailableError struct {
	Reason string
	Err    error
}

// ReasonPermitsUnavailable is the UnavailableError reason of a request
// whose permits could not be written through to Redis after its owner had
// charged its rate keys: the charge stays (one decision's cost, the safe
// direction), so its failure policy records no fallback debt for them.
const ReasonPermitsUnavailable = "permits_unavailable"

func (e *UnavailableError) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// FallbackDebtor is implemented by a Store that repays fallback admissions
// (the cluster does): the limiter reports each request it admitted by a
// failure policy, and the store charges those units to the keys' owner once
// the owner answers again, so a fault shifts admissions in time instead of
// adding them. Only fast composites are reported: strict keys live in Redis.
// RecordFallback must not block; keys and limits (the keys' own limits, not
// the fallback ones) are valid only during the call.
type FallbackDebtor interface {
	RecordFallback(group string, keys []string, limits []gcra.Limit, cost int64)
}

// PolicySource yields the policy to decide with; hot-reloading sources swap
// it atomically. *policy.Watcher satisfies it.
type PolicySource interface {
	Current() *policy.Policy
}

// Config tunes a Limiter.
type Config struct {
	// DeniedLogInterval is the least time between two log lines about
	// denied keys (keys never become metric labels). Zero disables them.
	DeniedLogInterval time.Duration
	// BatchConcurrency is the most requests of one DecideBatch decided at
	// the same time while they wait on other processes (owner nodes,
	// Redis); see DecideBatch. Each costs a goroutine for the batch's
	// duration. At least 1.
	BatchConcurrency int
	// FallbackMaxKeys caps the keys the local-fallback state (limits with
	// on_failure: local, decided here while their store cannot) holds; 0
	// means no cap. It works like the owner's --max-keys: a new key first
	// evicts rested keys (they decide like missing ones, so nothing is
	// lost); when every held key is live, the request's local limits are
	// decided as on_failure: closed (denied, with mode "closed"), so a flood
	// of distinct keys during an outage costs bounded memory and never
	// admits without a bound.
	FallbackMaxKeys int
}

// DefaultConfig logs denied keys at most once a second and decides up to
// 128 waiting requests of a batch at once (a peer batch's default size).
func DefaultConfig() Config { return Config{DeniedLogInterval: time.Second, BatchConcurrency: 128} }

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error {
	if c.DeniedLogInterval < 0 {
		return fmt.Errorf("limiter: denied log interval %s is negative", c.DeniedLogInterval)
	}
	if c.BatchConcurrency < 1 {
		return fmt.Errorf("limiter: batch concurrency %d must be at least 1", c.BatchConcurrency)
	}
	if c.FallbackMaxKeys < 0 {
		return fmt.Errorf("limiter: fallback max keys %d is negative", c.FallbackMaxKeys)
	}
	return nil
}

// Limiter answers Decide requests against the current policy. Safe for
// concurrent use; it starts no goroutines.
type Limiter struct {
	policies PolicySource
	store    Store
	now      func() time.Time // stamps requests (WithClock); clk.Now by default
	clk      clock.Clock      // measures decision latency
	metrics  *metrics
	denied   *deniedLog
	local    *memstore.Store // state for on_failure: local decisions
	members  func() int      // live members this node sees, for fallback shares
	part     FallbackPart    // nil, or set by WithFallbackPart
	debtor   FallbackDebtor  // the store, when it repays fallback admissions
	observe  func(Decision)  // nil, or set by WithObserver
	hinter   WaitHinter      // the store, when it says which requests wait
	calls    sync.Pool       // of *storeCall, reused across store calls
	batches  sync.Pool       // of *batchScratch, reused across batches
	// batchConcurrency is Config.BatchConcurrency.
	batchConcurrency int
}

// Option customises a Limiter beyond its Config.
type Option func(*Limiter)

// WithClock replaces the wall clock used to stamp requests.
func WithClock(now func() time.Time) Option { return func(l *Limiter) { l.now = now } }

// WithMembers gives the limiter the number of live cluster members this
// node currently sees (itself included). A limit that falls back to its
// per-node share (policy.Limit.SharedFallback) divides its rate and burst
// by it at each fallback decision, so the share follows membership.
// members must be safe for concurrent use and cheap; a result below 1
// counts as 1. Without this option the count is 1: a single node falls
// back to the full limit.
func WithMembers(members func() int) Option { return func(l *Limiter) { l.members = members } }

// New returns a Limiter deciding with store against policies. Metrics are
// registered on reg (nil: not registered); logger receives denied-key lines.
func New(cfg Config, policies PolicySource, store Store, logger *slog.Logger, reg prometheus.Registerer, opts ...Option) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if policies == nil || store == nil {
		return nil, errors.New("limiter: a policy source and a store are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	local := memstore.DefaultConfig()
	local.MaxKeys = cfg.FallbackMaxKeys
	l := &Limiter{policies: policies, store: store, clk: clock.Real(), local: memstore.New(local), members: func() int { return 1 }}
	for _, o := range opts {
		o(l)
	}
	if l.now == nil {
		l.now = l.clk.Now
	}
	l.debtor, _ = store.(FallbackDebtor)
	l.hinter, _ = store.(WaitHinter)
	l.calls.New = func() any { return new(storeCall) }
	l.batches.New = func() any { return new(batchScratch) }
	l.batchConcurrency = cfg.BatchConcurrency
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	l.metrics = m
	l.denied = newDeniedLog(logger, cfg.DeniedLogInterval)
	return l, nil
}

// Decide answers one request. Errors wrapping ErrInvalidRequest are the
// caller's; others come from the store (the request may then be retried).
func (l *Limiter) Decide(ctx context.Context, r Request) (Decision, error) {
	if err := validate(r); err != nil {
		return Decision{}, err
	}
	p := l.policies.Current()
	var buf [8]policy.Match
	matches, err := resolve(p, r.Descriptors, buf[:0])
	if err != nil {
		return Decision{}, err
	}
	if err := checkReserve(r.Reserve, matches); err != nil {
		return Decision{}, err
	}
	return l.decide(ctx, p, matches, nil, ask{cost: r.Cost, now: l.now().UnixNano(), reserve: r.Reserve})
}

// ask is what one decision asks of its matches: the cost, the request's
// stamp, whether it reserves, and (DecideBatch) whether every store error
// but the caller's own context ending is met with the failure policy
// (reason "store_failed"), so that it stays this request's.
type ask struct {
	cost, now int64
	reserve   bool
	lenient   bool
}

// decide decides one validated, resolved request. The Decision's Limits
// are limits when it has len(matches) entries (a batch hands out parts of
// one slab), and a new slice otherwise.
func (l *Limiter) decide(ctx context.Context, p *policy.Policy, matches []policy.Match, limits []LimitDecision, a ask) (Decision, error) {
	start := l.clk.Now()
	d := Decision{Allowed: true, PolicyVersion: p.Version}
	if len(matches) == 0 {
		l.metrics.unmatched.Inc()
		return d, nil
	}
	d.Matched = true
	if len(limits) != len(matches) {
		limits = make([]LimitDecision, len(matches))
	}
	d.Limits = limits
	if err := l.decideMatches(ctx, matches, a, &d); err != nil {
		return Decision{}, fmt.Errorf("limiter: %w", err)
	}
	if !d.Allowed {
		d.Permit, d.Reservation = nil, nil // a denial holds nothing
	}
	l.record(p, matches, &d, a.now)
	l.metrics.latency.Observe(l.clk.Since(start).Seconds())
	if l.observe != nil {
		l.observe(d)
	}
	return d, nil
}

// decideMatches decides the enforced limits as one composite; then, only if
// the request is admitted, each shadow limit on its own. A shadow limit
// therefore tracks what it would have admitted had it been enforced, and a
// request that enforced limits refuse consumes no shadow quota. Only the
// enforced composite reserves.
func (l *Limiter) decideMatches(ctx context.Context, ms []policy.Match, a ask, d *Decision) error {
	var enforced, shadow []int
	for i, m := range ms {
		if m.Shadow {
			shadow = append(shadow, i)
		} else {
			enforced = append(enforced, i)
		}
	}
	if len(enforced) > 0 {
		agg, err := l.composite(ctx, ms, enforced, a, d)
		if err != nil {
			var unavailable *UnavailableError
			if !errors.As(err, &unavailable) || ctx.Err() != nil {
				return err
			}
			agg = l.fallback(ctx, ms, enforced, a.cost, a.now, d, unavailable.Reason)
		}
		d.Allowed, d.TooCostly = agg.Allowed, agg.TooCostly
		d.RetryAfter, d.ResetAfter, d.Remaining = nanos(agg.RetryAfter), nanos(agg.ResetAfter), agg.Remaining
	}
	if !d.Allowed {
		// Not evaluated: a refused request never reaches a shadow limit,
		// and stores have no read-only decision. Report the limit as
		// admitting with nothing known about its remaining quota.
		for _, i := range shadow {
			d.Limits[i] = describe(ms[i], gcra.Result{Allowed: true})
		}
		return nil
	}
	a.reserve = false
	for n, i := range shadow {
		agg, err := l.composite(ctx, ms, shadow[n:n+1], a, d)
		if err != nil {
			if ctx.Err() != nil {
				l.releaseUndelivered(ctx, d)
				return err
			}
			// A shadow limit never decides: one that fails, however, is
			// reported as admitting and otherwise left out, and the
			// enforced limits' answer (and the permit it holds) stands.
			d.Limits[i] = describe(ms[i], gcra.Result{Allowed: true})
			continue
		}
		if len(enforced) == 0 && (n == 0 || agg.Remaining < d.Remaining) {
			d.Remaining = agg.Remaining
		}
	}
	return nil
}

// releaseTimeout bounds releaseUndelivered's Release.
const releaseTimeout = time.Second

// releaseUndelivered gives back, best effort, the slots of the permit the
// enforced limits granted to a decision that will not reach its caller
// (its context ended before the decision was complete): left alone, they
// would stay taken until the permit's ttl. A reservation is left charged
// (it expires unsettled, as one whose caller vanished does).
func (l *Limiter) releaseUndelivered(ctx context.Context, d *Decision) {
	if d.Permit == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	l.Release(rctx, d.Permit)
	d.Permit = nil
}

// composite decides ms[idx...] in one store call and fills d.Limits (and,
// when the store admitted, d.Permit and d.Reservation). With a.lenient
// set, a store error other than ctx ending is returned as an
// *UnavailableError (reason "store_failed"). The call carries a Grant
// only when it has concurrency keys or reserves: plain decisions allocate
// nothing for it.
func (l *Limiter) composite(ctx context.Context, ms []policy.Match, idx []int, a ask, d *Decision) (gcra.Result, error) {
	sc := l.calls.Get().(*storeCall)
	defer l.calls.Put(sc)
	req := &sc.req
	*req = decide.Request{Group: ms[idx[0]].GroupValue, Keys: sc.keys[:0], Limits: sc.limits[:0], Defs: sc.defs[:0], Cost: a.cost, Now: a.now, Reserve: a.reserve}
	out := sc.out[:0]
	defer func() { clear(sc.keys[:]); clear(sc.defs[:]); sc.grant = decide.Grant{} }() // hold no key strings, policies or tokens while pooled
	for _, i := range idx {
		def := ms[i].Limit.Def()
		req.Keys = append(req.Keys, ms[i].Key)
		req.Limits = append(req.Limits, ms[i].Params)
		req.Defs = append(req.Defs, def)
		req.Strict = req.Strict || def.Strict
		out = append(out, gcra.Result{})
	}
	if req.Reserve || req.HasConcurrency() {
		sc.grant = decide.Grant{}
		req.Grant = &sc.grant
	}
	agg, err := l.store.Decide(ctx, req, out)
	if err != nil {
		l.metrics.storeErrors.Inc()
		if _, ok := errors.AsType[*UnavailableError](err); a.lenient && !ok && ctx.Err() == nil {
			err = &UnavailableError{Reason: ReasonStoreFailed, Err: err}
		}
		return agg, err
	}
	g := req.Grant
	for n, i := range idx {
		d.Limits[i] = describe(ms[i], out[n])
		if g != nil && n < len(g.InFlight) && req.Defs[n].Concurrency {
			d.Limits[i].InFlight = g.InFlight[n]
		}
	}
	if g != nil && agg.Allowed {
		if d.Permit == nil {
			d.Permit = g.Permit
		}
		if d.Reservation == nil {
			d.Reservation = g.Reservation
		}
	}
	d.FromLease = d.FromLease || req.FromLease
	return agg, nil
}

// storeCall is the scratch of one store call: a Store is an interface, so
// a request built on the stack would escape to the heap on every call.
type storeCall struct {
	req    decide.Request
	keys   [8]string
	limits [8]gcra.Limit
	defs   [8]*decide.Def
	out    [8]gcra.Result
	grant  decide.Grant
}

// MemoryStore decides in mem: the embedded, single-node store. It holds
// TATs only: a request with concurrency keys, Reserve or an Op is refused
// with ErrNoPermits (the owner's store holds permits and reservations).
func MemoryStore(mem *memstore.Store) Store { return memoryStore{mem} }

// ErrNoPermits is MemoryStore's answer to what needs permits or
// reservations.
var ErrNoPermits = errors.New("limiter: the memory store holds no permits or reservations")

type memoryStore struct{ mem *memstore.Store }

var _ WaitHinter = memoryStore{}

// MayWait is false: memory never waits on another process.
func (memoryStore) MayWait(string, string, bool) bool { return false }

func (s memoryStore) Decide(ctx context.Context, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	if r.Op != nil || r.Reserve || r.HasConcurrency() {
		return gcra.Result{}, ErrNoPermits
	}
	return s.mem.Decide(ctx, r.Group, r.Keys, r.Limits, r.Cost, r.Now, out)
}

func describe(m policy.Match, r gcra.Result) LimitDecision {
	if m.Limit.Def().Concurrency {
		_, ttl := decide.PermitLimit(m.Params)
		return LimitDecision{
			Name: m.Limit.Name, Key: m.Key, Shadow: m.Shadow, Allowed: r.Allowed, TooCostly: r.TooCostly,
			Remaining: r.Remaining, RetryAfter: nanos(r.RetryAfter), ResetAfter: nanos(r.ResetAfter),
			Burst: m.Params.Burst, Window: nanos(ttl), Kind: KindConcurrency,
		}
	}
	return LimitDecision{
		Kind:       KindRate,
		Name:       m.Limit.Name,
		Key:        m.Key,
		Shadow:     m.Shadow,
		Allowed:    r.Allowed,
		TooCostly:  r.TooCostly,
		Remaining:  r.Remaining,
		RetryAfter: nanos(r.RetryAfter),
		ResetAfter: nanos(r.ResetAfter),
		Burst:      m.Params.Burst,
		Window:     nanos(m.Params.Span()),
	}
}

// nanos turns a gcra duration (nanoseconds) into a time.Duration.
func nanos(ns int64) time.Duration { return time.Duration(ns) }

package limiter

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/ticket"
)

// concPolicy has a concurrency limit (jobs, made one by hand below until
// policy knows kind: concurrency: rate 2/m burst 2 reads as 2 in
// flight, ttl 30 s), rate limits beside it, and a strict and a global one.
const concPolicy = `
version: conc
limits:
  - {name: jobs, match: [tenant, job], group: tenant, rate: 2/m, burst: 2, on_failure: open}
  - {name: locks, match: [tenant, lock], group: tenant, rate: 6/m, burst: 1, on_failure: closed}
  - {name: llocal, match: [tenant, llock], group: tenant, rate: 6/m, burst: 1, on_failure: local}
  - {name: tokens, match: [tenant], rate: 100/s, burst: 50, on_failure: open}
  - {name: strictly, match: [s], rate: 10/s, burst: 5, consistency: strict}
  - {name: world, match: [tenant, w], group: tenant, rate: 10/s, burst: 5, scope: global, on_failure: closed}
`

const concNow = int64(1_700_000_000_000_000_000)

// recordingStore records every request it is given (copied: the limiter
// reuses them) and answers from answer, filling the Grant as grant says.
// DecideBatch may call it from several goroutines; read its records once
// the calls returned.
type recordingStore struct {
	mu     sync.Mutex
	reqs   []decide.Request
	grants []bool // whether each request carried a Grant
	answer func(r *decide.Request, out []gcra.Result) (gcra.Result, error)
	debts  [][]string
}

func (s *recordingStore) Decide(_ context.Context, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	c := r.Clone()
	if r.Op != nil {
		op := *r.Op
		c.Op = &op
	}
	c.Grant = nil
	s.mu.Lock()
	s.reqs = append(s.reqs, c)
	s.grants = append(s.grants, r.Grant != nil)
	s.mu.Unlock()
	if s.answer == nil {
		for i := range out {
			out[i] = gcra.Result{Allowed: true, Remaining: 1}
		}
		return gcra.Result{Allowed: true, Remaining: 1}, nil
	}
	return s.answer(r, out)
}

func (s *recordingStore) RecordFallback(_ string, keys []string, _ []gcra.Limit, _ int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.debts = append(s.debts, slices.Clone(keys))
}

func newConcLimiter(t *testing.T, s Store) (*Limiter, *policy.Policy) {
	t.Helper()
	p, err := policy.Parse("conc.yaml", []byte(concPolicy))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"jobs", "locks", "llocal"} {
		p.Limit(name).Def().Concurrency = true // until policy has kind: concurrency
	}
	lim, err := New(DefaultConfig(), policy.Static(p), s, nil, prometheus.NewRegistry(),
		WithClock(func() time.Time { return time.Unix(0, concNow) }))
	if err != nil {
		t.Fatal(err)
	}
	return lim, p
}

// grantAll admits every key and answers a permit token and a reservation
// token (when asked), with in-flight counts on the concurrency keys.
func grantAll(r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	for i := range out {
		out[i] = gcra.Result{Allowed: true, Remaining: 1, ResetAfter: 30e9}
	}
	if g := r.Grant; g != nil {
		g.InFlight = make([]int64, len(r.Keys))
		for i := range r.Keys {
			if r.Def(i).Concurrency {
				g.InFlight[i] = 1
				g.Permit = []byte("permit")
			}
		}
		if r.Reserve {
			g.Reservation = []byte("reservation")
		}
	}
	return gcra.Result{Allowed: true, Remaining: 1, ResetAfter: 30e9}, nil
}

func TestLimiter_Decide_concurrencyGrant(t *testing.T) {
	tests := []struct {
		name        string
		kv          []string
		reserve     bool
		answer      func(*decide.Request, []gcra.Result) (gcra.Result, error)
		wantGrant   bool
		wantAllowed bool
		permit      string
		reservation string
	}{
		{"plain rate", []string{"tenant", "a"}, false, grantAll, false, true, "", ""},
		{"concurrency admitted", []string{"tenant", "a", "job", "x"}, false, grantAll, true, true, "permit", ""},
		{"reserve admitted", []string{"tenant", "a"}, true, grantAll, true, true, "", "reservation"},
		{"both admitted", []string{"tenant", "a", "job", "x"}, true, grantAll, true, true, "permit", "reservation"},
		{"denied holds nothing", []string{"tenant", "a", "job", "x"}, true, func(r *decide.Request, out []gcra.Result) (gcra.Result, error) {
			grantAll(r, out) // a store that answers tokens on a denial: the limiter drops them
			out[0] = gcra.Result{RetryAfter: 7e9, ResetAfter: 30e9}
			return gcra.Result{RetryAfter: 7e9, ResetAfter: 30e9}, nil
		}, true, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &recordingStore{answer: tt.answer}
			lim, _ := newConcLimiter(t, s)
			d, err := lim.Decide(context.Background(), Request{Descriptors: desc(tt.kv...), Cost: 1, Reserve: tt.reserve})
			if err != nil {
				t.Fatal(err)
			}
			if len(s.reqs) != 1 {
				t.Fatalf("%d store calls, want 1", len(s.reqs))
			}
			if s.grants[0] != tt.wantGrant || s.reqs[0].Reserve != tt.reserve {
				t.Errorf("store got grant %v reserve %v, want %v %v", s.grants[0], s.reqs[0].Reserve, tt.wantGrant, tt.reserve)
			}
			if d.Allowed != tt.wantAllowed || string(d.Permit) != tt.permit || string(d.Reservation) != tt.reservation {
				t.Errorf("allowed %v permit %q reservation %q, want %v %q %q", d.Allowed, d.Permit, d.Reservation, tt.wantAllowed, tt.permit, tt.reservation)
			}
			if !tt.wantAllowed && (d.RetryAfter != 7*time.Second || d.Limits[0].RetryAfter != 7*time.Second) {
				t.Errorf("denial retry %s (limit %s), want the store's exact 7s", d.RetryAfter, d.Limits[0].RetryAfter)
			}
			if tt.permit == "" && d.Permit != nil || tt.reservation == "" && d.Reservation != nil {
				t.Errorf("absent tokens must be nil: %v %v", d.Permit, d.Reservation)
			}
		})
	}
}

func TestLimiter_Decide_concurrencyLimitStatus(t *testing.T) {
	s := &recordingStore{answer: grantAll}
	lim, _ := newConcLimiter(t, s)
	d, err := lim.Decide(context.Background(), Request{Descriptors: desc("tenant", "a", "job", "x"), Cost: 1})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]LimitDecision{}
	for _, l := range d.Limits {
		byName[l.Name] = l
	}
	jobs, tokens := byName["jobs"], byName["tokens"]
	if jobs.Kind != KindConcurrency || jobs.Burst != 2 || jobs.Window != 30*time.Second || jobs.InFlight != 1 || jobs.Remaining != 1 || jobs.ResetAfter != 30*time.Second {
		t.Errorf("jobs = %+v, want concurrency, burst 2, window 30s, in flight 1, remaining 1, reset 30s", jobs)
	}
	if tokens.Kind != KindRate || tokens.InFlight != 0 || tokens.Window != time.Second/2 {
		t.Errorf("tokens = %+v, want rate, in flight 0, window 0.5s", tokens)
	}
	r := s.reqs[0]
	for i, k := range r.Keys {
		if want := strings.Contains(k, ":jobs:"); r.Defs[i].Concurrency != want {
			t.Errorf("key %s: Def.Concurrency %v", k, r.Defs[i].Concurrency)
		}
	}
}

func TestLimiter_Decide_reserveRefused(t *testing.T) {
	for _, kv := range [][]string{{"s", "1"}, {"tenant", "a", "w", "1"}} {
		s := &recordingStore{}
		lim, _ := newConcLimiter(t, s)
		_, err := lim.Decide(context.Background(), Request{Descriptors: desc(kv...), Cost: 1, Reserve: true})
		if !errors.Is(err, ErrInvalidRequest) || len(s.reqs) != 0 {
			t.Errorf("%v: err %v, %d store calls; want invalid, none", kv, err, len(s.reqs))
		}
		// The same request without reserve is decided.
		if _, err := lim.Decide(context.Background(), Request{Descriptors: desc(kv...), Cost: 1}); err != nil {
			t.Errorf("%v without reserve: %v", kv, err)
		}
	}
}

func TestLimiter_DecideBatch_reserveAndConcurrencyPerRequest(t *testing.T) {
	s := &recordingStore{answer: grantAll}
	lim, _ := newConcLimiter(t, s)
	ds, err := lim.DecideBatch(context.Background(), []Request{
		{Descriptors: desc("tenant", "a", "job", "x"), Cost: 1},
		{Descriptors: desc("tenant", "b"), Cost: 1, Reserve: true},
		{Descriptors: desc("tenant", "c"), Cost: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := [][2]string{}
	for _, d := range ds {
		got = append(got, [2]string{string(d.Permit), string(d.Reservation)})
	}
	if want := [][2]string{{"permit", ""}, {"", "reservation"}, {"", ""}}; !slices.Equal(got, want) {
		t.Errorf("tokens %v, want %v", got, want)
	}
	s.reqs = nil
	_, err = lim.DecideBatch(context.Background(), []Request{
		{Descriptors: desc("tenant", "a"), Cost: 1},
		{Descriptors: desc("s", "1"), Cost: 1, Reserve: true},
	})
	if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "requests[1]") || len(s.reqs) != 0 {
		t.Errorf("err %v, %d store calls; want requests[1] invalid and nothing decided", err, len(s.reqs))
	}
}

func TestLimiter_Decide_concurrencyFallback(t *testing.T) {
	failing := func(reason string) func(r *decide.Request, out []gcra.Result) (gcra.Result, error) {
		return func(r *decide.Request, out []gcra.Result) (gcra.Result, error) {
			grantAll(r, out) // tokens written before the failure must not leak out
			return gcra.Result{}, &UnavailableError{Reason: reason, Err: errors.New("down")}
		}
	}
	tests := []struct {
		name        string
		kv          []string
		reserve     bool
		reason      string
		wantAllowed bool
		wantMode    string
		wantRetry   time.Duration
		wantDebt    []string // limit names recorded as debt; nil: no debt recorded
	}{
		{"open admits without permit", []string{"tenant", "a", "job", "x"}, false, "owner_unreachable", true, "open", 0, []string{"tokens"}},
		{"open reserve has no reservation", []string{"tenant", "a"}, true, "owner_unreachable", true, "open", 0, []string{"tokens"}},
		{"closed denies with ttl", []string{"tenant", "a", "lock", "x"}, false, "owner_unreachable", false, "closed", 10 * time.Second, nil},
		{"local concurrency is closed", []string{"tenant", "a", "llock", "x"}, false, "owner_unreachable", false, "closed", 10 * time.Second, nil},
		// The owner charged the rate keys before the permits' write
		// failed: no debt, or they would be charged twice.
		{"open after the owner charged", []string{"tenant", "a", "job", "x"}, false, ReasonPermitsUnavailable, true, "open", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &recordingStore{answer: failing(tt.reason)}
			lim, _ := newConcLimiter(t, s)
			d, err := lim.Decide(context.Background(), Request{Descriptors: desc(tt.kv...), Cost: 1, Reserve: tt.reserve})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != tt.wantAllowed || d.Fallback == nil || d.Fallback.Mode != tt.wantMode || d.RetryAfter != tt.wantRetry {
				t.Errorf("allowed %v fallback %+v retry %s, want %v %s %s", d.Allowed, d.Fallback, d.RetryAfter, tt.wantAllowed, tt.wantMode, tt.wantRetry)
			}
			if d.Permit != nil || d.Reservation != nil {
				t.Errorf("fallback answered tokens %q %q", d.Permit, d.Reservation)
			}
			for _, l := range d.Limits {
				if l.InFlight != 0 {
					t.Errorf("%s: in flight %d under fallback", l.Name, l.InFlight)
				}
			}
			var debt []string
			for _, keys := range s.debts {
				for _, k := range keys {
					debt = append(debt, strings.Split(k, ":")[2])
				}
			}
			if !slices.Equal(debt, tt.wantDebt) {
				t.Errorf("debt recorded for %v, want %v", debt, tt.wantDebt)
			}
		})
	}
}

// TestLimiter_Decide_concurrencyOnlyFallbackRecordsNoDebt: a request whose
// enforced limits are all concurrency limits records no debt at all.
func TestLimiter_Decide_concurrencyOnlyFallbackRecordsNoDebt(t *testing.T) {
	p, err := policy.Parse("c.yaml", []byte("version: c\nlimits:\n  - {name: jobs, match: [tenant], rate: 2/m, burst: 2, on_failure: open}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p.Limit("jobs").Def().Concurrency = true
	s := &recordingStore{answer: func(*decide.Request, []gcra.Result) (gcra.Result, error) {
		return gcra.Result{}, &UnavailableError{Reason: "owner_unreachable", Err: errors.New("down")}
	}}
	lim, err := New(DefaultConfig(), policy.Static(p), s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := lim.Decide(context.Background(), Request{Descriptors: desc("tenant", "a"), Cost: 1})
	if err != nil || !d.Allowed || d.Fallback == nil || d.Permit != nil {
		t.Fatalf("decision %+v, err %v; want admitted by fallback without a permit", d, err)
	}
	if len(s.debts) != 0 {
		t.Errorf("debt recorded: %v", s.debts)
	}
}

// shadowConcPolicy has a concurrency limit and a shadow rate limit that
// every request of it matches.
const shadowConcPolicy = `
version: sc
limits:
  - {name: jobs, kind: concurrency, match: [tenant, job], group: tenant, max_in_flight: 2}
  - {name: trial, match: [tenant], rate: 10/s, burst: 5, shadow: true}
`

// grantPermit is grantAll with a real permit token, one Release decodes.
func grantPermit(t *testing.T) func(r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	return func(r *decide.Request, out []gcra.Result) (gcra.Result, error) {
		agg, _ := grantAll(r, out)
		if r.Grant != nil && r.Grant.Permit != nil {
			tok, err := ticket.Encode(ticket.Ticket{Kind: ticket.Permit, Group: r.Group, Keys: slices.Clone(r.Keys), ID: [16]byte{7}})
			if err != nil {
				t.Error(err)
			}
			r.Grant.Permit = tok
		}
		if r.Op != nil && r.Grant != nil {
			r.Grant.Done = true
		}
		return agg, nil
	}
}

func newShadowConcLimiter(t *testing.T, s Store) *Limiter {
	t.Helper()
	p, err := policy.Parse("sc.yaml", []byte(shadowConcPolicy))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := New(DefaultConfig(), policy.Static(p), s, nil, prometheus.NewRegistry(),
		WithClock(func() time.Time { return time.Unix(0, concNow) }))
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// A shadow limit never decides: when its store call fails after the
// enforced limits admitted and took a permit, the decision stands, with
// the permit, and the shadow limit reads as admitting. (It used to fail the
// whole decision, the caller never got the token, and the slot stayed
// taken until the permit's ttl.)
func TestLimiter_Decide_shadowFailureKeepsTheGrant(t *testing.T) {
	grant := grantPermit(t)
	s := &recordingStore{answer: func(r *decide.Request, out []gcra.Result) (gcra.Result, error) {
		if r.Def(0).Shadow {
			return gcra.Result{}, errors.New("shadow store broke")
		}
		return grant(r, out)
	}}
	lim := newShadowConcLimiter(t, s)
	d, err := lim.Decide(t.Context(), Request{Descriptors: map[string]string{"tenant": "acme", "job": "export"}, Cost: 1})
	if err != nil || !d.Allowed || d.Permit == nil {
		t.Fatalf("decision %+v, %v; want allowed with its permit", d, err)
	}
	for _, ld := range d.Limits {
		if ld.Shadow && !ld.Allowed {
			t.Errorf("failed shadow limit %s reads as denying", ld.Name)
		}
	}
	if ok, err := lim.Release(t.Context(), d.Permit); err != nil || !ok {
		t.Fatalf("release of the returned permit: %v, %v", ok, err)
	}
}

// When the caller's context ends between the enforced limits' grant and
// the shadow limits, the decision cannot reach it: the permit is released
// at once rather than held until its ttl.
func TestLimiter_Decide_callerGoneReleasesThePermit(t *testing.T) {
	grant := grantPermit(t)
	ctx, cancel := context.WithCancel(t.Context())
	s := &recordingStore{answer: func(r *decide.Request, out []gcra.Result) (gcra.Result, error) {
		if r.Op == nil && r.Def(0).Shadow {
			cancel() // the caller gives up while the shadow limit is asked
			return gcra.Result{}, context.Canceled
		}
		return grant(r, out)
	}}
	lim := newShadowConcLimiter(t, s)
	if _, err := lim.Decide(ctx, Request{Descriptors: map[string]string{"tenant": "acme", "job": "export"}, Cost: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("decision error %v, want context.Canceled", err)
	}
	var released int
	for _, r := range s.reqs {
		if r.Op != nil && r.Op.Kind == decide.OpRelease && r.Op.ID == [16]byte{7} {
			released++
		}
	}
	if released != 1 {
		t.Fatalf("%d releases of the undelivered permit, want 1 (requests: %d)", released, len(s.reqs))
	}
}

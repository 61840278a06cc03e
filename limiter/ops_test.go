package limiter

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/ticket"
)

var testID = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// keysOf returns the keys p resolves for kv, by limit name.
func keysOf(t *testing.T, p *policy.Policy, kv ...string) map[string]string {
	t.Helper()
	ms, err := p.Resolve(desc(kv...), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range ms {
		out[m.Limit.Name] = m.Key
	}
	return out
}

func token(t *testing.T, kind ticket.Kind, group string, keys ...string) []byte {
	t.Helper()
	b, err := ticket.Encode(ticket.Ticket{Kind: kind, Group: group, Keys: keys, ID: testID})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// doneStore answers every op done, with a renewal expiry 20 s after now
// and a settlement of 3 refunded, 1 extra, 2 forgiven.
func doneStore(r *decide.Request, _ []gcra.Result) (gcra.Result, error) {
	r.Grant.Done = true
	r.Grant.Expiry = r.Now + 20e9
	r.Grant.Settlement = gcra.Settlement{Refunded: 3, Extra: 1, Forgiven: 2}
	return gcra.Result{}, nil
}

func TestLimiter_ops_sendTheTokensOpToTheStore(t *testing.T) {
	s := &recordingStore{answer: doneStore}
	lim, p := newConcLimiter(t, s)
	k := keysOf(t, p, "tenant", "a", "job", "x", "lock", "y")
	permit := token(t, ticket.Permit, "a", k["jobs"], k["locks"])
	reservation := token(t, ticket.Reservation, "a", k["tokens"])
	ctx := context.Background()

	released, err := lim.Release(ctx, permit)
	if err != nil || !released {
		t.Fatalf("Release = %v, %v", released, err)
	}
	rn, err := lim.Renew(ctx, permit, 8*time.Second)
	if err != nil || rn != (Renewal{Renewed: true, ExpiresIn: 20 * time.Second}) {
		t.Fatalf("Renew = %+v, %v", rn, err)
	}
	st, err := lim.Settle(ctx, reservation, 7)
	if err != nil || st != (Settlement{Settled: true, Refunded: 3, Extra: 1, Forgiven: 2}) {
		t.Fatalf("Settle = %+v, %v", st, err)
	}
	want := []struct {
		op   decide.Op
		keys []string
	}{
		{decide.Op{Kind: decide.OpRelease, ID: testID}, []string{k["jobs"], k["locks"]}},
		{decide.Op{Kind: decide.OpRenew, ID: testID, TTL: 8e9}, []string{k["jobs"], k["locks"]}},
		{decide.Op{Kind: decide.OpSettle, ID: testID, Actual: 7}, []string{k["tokens"]}},
	}
	if len(s.reqs) != len(want) {
		t.Fatalf("%d store calls, want %d", len(s.reqs), len(want))
	}
	for i, w := range want {
		r := s.reqs[i]
		if r.Op == nil || *r.Op != w.op || !s.grants[i] {
			t.Errorf("call %d: op %+v grant %v, want %+v with a grant", i, r.Op, s.grants[i], w.op)
		}
		if r.Cost != 0 || r.Group != "a" || r.Now != concNow || !slices.Equal(r.Keys, w.keys) || r.Reserve || r.Strict {
			t.Errorf("call %d: cost %d group %q now %d keys %v reserve %v strict %v", i, r.Cost, r.Group, r.Now, r.Keys, r.Reserve, r.Strict)
		}
		for j, key := range r.Keys {
			lim, set, _ := p.KeyLimit(key)
			if r.Limits[j] != set[0] || r.Defs[j] != lim.Def() {
				t.Errorf("call %d key %d: limit %+v def %p, want %+v %p", i, j, r.Limits[j], r.Defs[j], set[0], lim.Def())
			}
		}
	}
	if got := s.reqs[0].Limits[0]; got != (gcra.Limit{Interval: 30e9, Burst: 2}) {
		t.Errorf("jobs' permit bound %+v, want 2 in flight for 30 s", got)
	}
}

func TestLimiter_ops_badTokensChangeNothing(t *testing.T) {
	s := &recordingStore{answer: doneStore}
	lim, p := newConcLimiter(t, s)
	k := keysOf(t, p, "tenant", "a", "job", "x", "w", "1")
	kb := keysOf(t, p, "tenant", "b", "job", "x")
	permit := token(t, ticket.Permit, "a", k["jobs"])
	ctx := context.Background()
	tests := []struct {
		name      string
		call      func() error
		malformed bool
	}{
		{"empty release", func() error { _, err := lim.Release(ctx, nil); return err }, true},
		{"garbage renew", func() error { _, err := lim.Renew(ctx, []byte("garbage"), 0); return err }, true},
		{"truncated settle", func() error {
			b := token(t, ticket.Reservation, "a", k["tokens"])
			_, err := lim.Settle(ctx, b[:len(b)-1], 1)
			return err
		}, true},
		{"reservation released", func() error {
			_, err := lim.Release(ctx, token(t, ticket.Reservation, "a", k["tokens"]))
			return err
		}, false},
		{"permit settled", func() error { _, err := lim.Settle(ctx, permit, 1); return err }, false},
		{"permit on a rate key", func() error {
			_, err := lim.Release(ctx, token(t, ticket.Permit, "a", k["tokens"]))
			return err
		}, false},
		{"reservation on a concurrency key", func() error {
			_, err := lim.Settle(ctx, token(t, ticket.Reservation, "a", k["jobs"]), 1)
			return err
		}, false},
		{"key of another group", func() error {
			_, err := lim.Release(ctx, token(t, ticket.Permit, "a", kb["jobs"]))
			return err
		}, false},
		{"negative ttl", func() error { _, err := lim.Renew(ctx, permit, -time.Nanosecond); return err }, false},
		{"ttl over the limit's", func() error { _, err := lim.Renew(ctx, permit, 30*time.Second+1); return err }, false},
		{"negative actual", func() error {
			_, err := lim.Settle(ctx, token(t, ticket.Reservation, "a", k["tokens"]), -1)
			return err
		}, false},
		{"actual over the key's largest charge", func() error {
			// 100/s: a 10ms interval, so MaxSpan/T is about 4.5e5 units.
			_, err := lim.Settle(ctx, token(t, ticket.Reservation, "a", k["tokens"]), gcra.MaxSpan/int64(10*time.Millisecond)+1)
			return err
		}, false},
		{"actual over MaxCost", func() error {
			_, err := lim.Settle(ctx, token(t, ticket.Reservation, "a", k["tokens"]), MaxCost+1)
			return err
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, ErrInvalidRequest) || errors.Is(err, ticket.ErrMalformed) != tt.malformed {
				t.Errorf("err %v: want invalid request (malformed token %v)", err, tt.malformed)
			}
			if len(s.reqs) != 0 {
				t.Errorf("the store was asked: %+v", s.reqs)
			}
		})
	}
	// At the limit's ttl exactly, Renew is asked.
	if _, err := lim.Renew(ctx, permit, 30*time.Second); err != nil || len(s.reqs) != 1 {
		t.Errorf("renew at the limit's ttl: %v, %d store calls", err, len(s.reqs))
	}
}

func TestLimiter_ops_goneLimitsAreNotHeld(t *testing.T) {
	s := &recordingStore{answer: doneStore}
	lim, p := newConcLimiter(t, s)
	k := keysOf(t, p, "tenant", "a", "job", "x")
	gone := strings.Replace(k["jobs"], ":jobs:", ":removed:", 1)
	ctx := context.Background()
	if ok, err := lim.Release(ctx, token(t, ticket.Permit, "a", gone)); err != nil || ok {
		t.Errorf("Release of a gone limit = %v, %v; want false, nil", ok, err)
	}
	if st, err := lim.Settle(ctx, token(t, ticket.Reservation, "a", gone), 1); err != nil || st.Settled {
		t.Errorf("Settle of a gone limit = %+v, %v; want unsettled", st, err)
	}
	if len(s.reqs) != 0 {
		t.Fatalf("the store was asked about gone limits: %+v", s.reqs)
	}
	// A token with a gone key beside a live one operates on the live one.
	if ok, err := lim.Release(ctx, token(t, ticket.Permit, "a", gone, k["jobs"])); err != nil || !ok {
		t.Errorf("Release = %v, %v", ok, err)
	}
	if len(s.reqs) != 1 || !slices.Equal(s.reqs[0].Keys, []string{k["jobs"]}) {
		t.Errorf("store calls %+v, want one on %s", s.reqs, k["jobs"])
	}
}

func TestLimiter_ops_notHeldAndStoreFailures(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		answer     func(*decide.Request, []gcra.Result) (gcra.Result, error)
		wantReason string // "" means no error
	}{
		{"not held", func(*decide.Request, []gcra.Result) (gcra.Result, error) { return gcra.Result{}, nil }, ""},
		{"unavailable", func(*decide.Request, []gcra.Result) (gcra.Result, error) {
			return gcra.Result{}, &UnavailableError{Reason: "owner_unreachable", Err: errors.New("down")}
		}, "owner_unreachable"},
		{"other error", func(*decide.Request, []gcra.Result) (gcra.Result, error) {
			return gcra.Result{}, errors.New("broken")
		}, ReasonStoreFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim, p := newConcLimiter(t, &recordingStore{answer: tt.answer})
			k := keysOf(t, p, "tenant", "a", "job", "x")
			permit := token(t, ticket.Permit, "a", k["jobs"])
			reservation := token(t, ticket.Reservation, "a", k["tokens"])
			var errs []error
			ok, err := lim.Release(ctx, permit)
			errs = append(errs, err)
			rn, err := lim.Renew(ctx, permit, 0)
			errs = append(errs, err)
			st, err := lim.Settle(ctx, reservation, 0)
			errs = append(errs, err)
			if ok || rn.Renewed || st.Settled {
				t.Errorf("done: %v %v %v", ok, rn.Renewed, st.Settled)
			}
			for i, err := range errs {
				u, isU := errors.AsType[*UnavailableError](err)
				switch {
				case tt.wantReason == "" && err != nil:
					t.Errorf("op %d: %v", i, err)
				case tt.wantReason != "" && (!isU || u.Reason != tt.wantReason || errors.Is(err, ErrInvalidRequest)):
					t.Errorf("op %d: err %v, want unavailable %s", i, err, tt.wantReason)
				}
			}
		})
	}
}

func TestMemoryStore_refusesPermitsAndReservations(t *testing.T) {
	lim, p := newConcLimiter(t, MemoryStore(memstore.New(memstore.DefaultConfig())))
	ctx := context.Background()
	for _, r := range []Request{
		{Descriptors: desc("tenant", "a", "job", "x"), Cost: 1},
		{Descriptors: desc("tenant", "a"), Cost: 1, Reserve: true},
	} {
		if _, err := lim.Decide(ctx, r); !errors.Is(err, ErrNoPermits) {
			t.Errorf("%+v: err %v, want ErrNoPermits", r, err)
		}
	}
	k := keysOf(t, p, "tenant", "a", "job", "x")
	if _, err := lim.Release(ctx, token(t, ticket.Permit, "a", k["jobs"])); !errors.Is(err, ErrNoPermits) {
		t.Errorf("Release: %v, want ErrNoPermits", err)
	}
	if d, err := lim.Decide(ctx, Request{Descriptors: desc("tenant", "a"), Cost: 1}); err != nil || !d.Allowed {
		t.Errorf("plain request: %+v, %v", d, err)
	}
}

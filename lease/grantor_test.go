package lease

import (
	"errors"
	"maps"
	"math"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
)

// The fixtures: one unit per millisecond, burst 20 (leases may hold 10),
// grants of at most 8 units living 100ms. t0 is an arbitrary instant.
var (
	lim20 = gcra.Limit{Interval: 1000 * us, Burst: 20}
	terms = Terms{Max: 8, TTL: 100 * time.Millisecond}
)

const t0 = int64(1_000_000_000)

// us is a microsecond on gcra's time base (nanoseconds): the traces here are
// written in microseconds.
const us = int64(time.Microsecond)

func newTestGrantor(t *testing.T) *Grantor {
	t.Helper()
	g, err := NewGrantor(GrantorConfig{Name: "o"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func ask(peer string, demand float64) Request {
	return Request{Peer: peer, Group: "g", Key: "k", Limit: lim20, Terms: terms, Demand: demand, Label: "lim"}
}

func mustGrant(t *testing.T, g *Grantor, tat, now int64, req Request) Answer {
	t.Helper()
	a, err := g.Grant(tat, now, req)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestGrantor_Grant_sizesAndFits(t *testing.T) {
	tests := []struct {
		name   string
		tat    int64 // the key's state at t0
		demand float64
		want   Answer
	}{
		{"rested key, demand over a TTL", 0, 40, Answer{Outcome: Granted, Units: 4, TAT: t0 + 4000*us}},
		{"tiny demand still gets one unit", 0, 0.001, Answer{Outcome: Granted, Units: 1, TAT: t0 + 1000*us}},
		{"demand above max gets max", 0, 1e6, Answer{Outcome: Granted, Units: 8, TAT: t0 + 8000*us}},
		// A grant that leaves the key at its edge says when the next unit fits.
		{"only three fit: largest that fits", t0 + 17_000*us, 1e6, Answer{Outcome: Granted, Units: 3, TAT: t0 + 20_000*us, RetryAfter: 1000 * us}},
		{"exactly one fits", t0 + 19_000*us, 1e6, Answer{Outcome: Granted, Units: 1, TAT: t0 + 20_000*us, RetryAfter: 1000 * us}},
		{"all asked fit, one unit of room left", t0 + 11_000*us, 1e6, Answer{Outcome: Granted, Units: 8, TAT: t0 + 19_000*us}},
		{"seven and a half fit: next unit in 500µs", t0 + 12_500*us, 1e6, Answer{Outcome: Granted, Units: 7, TAT: t0 + 19_500*us, RetryAfter: 500 * us}},
		{"one fits 1µs later: exact retry", t0 + 19_001*us, 1e6, Answer{Outcome: Denied, RetryAfter: 1 * us, TAT: t0 + 19_001*us}},
		{"saturated: retry of one unit", t0 + 20_000*us, 1e6, Answer{Outcome: Denied, RetryAfter: 1000 * us, TAT: t0 + 20_000*us}},
		{"zero demand asks for nothing", 0, 0, Answer{Outcome: Settled, TAT: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newTestGrantor(t)
			got := mustGrant(t, g, tt.tat, t0, ask("p1", tt.demand))
			if tt.want.Outcome == Granted {
				tt.want.Grantor, tt.want.Lease, tt.want.TTL = "o", 1, 100_000*us
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if out := g.Outstanding("g", "k", t0); out != tt.want.Units {
				t.Fatalf("outstanding %d, want %d", out, tt.want.Units)
			}
		})
	}
}

func TestGrantor_Grant_capsOutstandingAtHalfTheBurst(t *testing.T) {
	g := newTestGrantor(t)
	a := mustGrant(t, g, 0, t0, ask("p1", 1e6))
	b := mustGrant(t, g, a.TAT, t0, ask("p2", 1e6))
	if b.Outcome != Granted || b.Units != 2 {
		t.Fatalf("second peer got %+v, want the 2 units left under the cap of 10", b)
	}
	c := mustGrant(t, g, b.TAT, t0, ask("p3", 1e6))
	if c.Outcome != Capped || c.TAT != b.TAT {
		t.Fatalf("third peer got %+v, want capped with the TAT unchanged", c)
	}
	if s := g.Stats()["lim"]; s.Grants != 2 || s.GrantedUnits != 10 || s.Capped != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestGrantor_Grant_busyWhileThePeersLeaseIsUnsettled(t *testing.T) {
	g := newTestGrantor(t)
	a := mustGrant(t, g, 0, t0, ask("p1", 40))
	// The peer's refresh carrying the return was lost: it asks again
	// holding nothing. The owner cannot know what it spent.
	b := mustGrant(t, g, a.TAT, t0+10_000*us, ask("p1", 40))
	if b.Outcome != Busy {
		t.Fatalf("got %+v, want busy", b)
	}
	// Once the lease has expired the peer may lease again.
	c := mustGrant(t, g, b.TAT, t0+100_000*us, ask("p1", 40))
	if c.Outcome != Granted || g.Stats()["lim"].ExpiredUnits != 4 {
		t.Fatalf("got %+v with stats %+v, want a grant after the 4 units expired", c, g.Stats())
	}
}

func TestGrantor_Effective_leasedUnitsDoNotRefill(t *testing.T) {
	g := newTestGrantor(t)
	a := mustGrant(t, g, 0, t0, ask("p1", 1e6)) // 8 units, TAT t0+8ms
	now := t0 + 50_000*us                       // plain GCRA would be rested
	eff := g.Effective("g", "k", a.TAT, now)
	if eff != now+8000*us {
		t.Fatalf("effective %d, want now + 8 intervals = %d", eff, now+8000*us)
	}
	if r, _ := gcra.Decide(eff, now, lim20, 13); r.Allowed {
		t.Fatal("13 units admitted directly while 8 of the burst of 20 are out on a lease")
	}
	if r, _ := gcra.Decide(eff, now, lim20, 12); !r.Allowed {
		t.Fatal("12 units denied: only the 8 leased units may be held back")
	}
	if got := g.Effective("g", "other", 123, now); got != 123 {
		t.Fatalf("a key without leases changed: %d", got)
	}
}

func TestGrantor_Grant_returnCreditsExactlyTheUnspentUnits(t *testing.T) {
	g := newTestGrantor(t)
	a := mustGrant(t, g, 0, t0, ask("p1", 1e6)) // 8 units
	now := t0 + 50_000*us
	req := ask("p1", 0)
	req.Return = Return{Grantor: "o", Lease: a.Lease, Unspent: 5}
	b := mustGrant(t, g, a.TAT, now, req)
	// Floor now + 8 intervals, minus the 5 returned: the 3 spent units
	// count as admitted at the latest moment they could have been.
	if b.Outcome != Settled || b.Credited != 5 || b.TAT != now+3000*us {
		t.Fatalf("got %+v, want settled, 5 credited, TAT now+3ms", b)
	}
	if g.Outstanding("g", "k", now) != 0 || g.Effective("g", "k", b.TAT, now) != b.TAT {
		t.Fatal("a settled lease still holds units")
	}
	// The same return again is a lease the owner no longer holds.
	c := mustGrant(t, g, b.TAT, now, req)
	if c.Credited != 0 || c.TAT != b.TAT {
		t.Fatalf("second return of the same lease credited: %+v", c)
	}
}

func TestGrantor_Grant_returnToAnotherLedgerCreditsNothing(t *testing.T) {
	// The key moved from owner "old" to "o" and each numbered its first
	// lease 1: the return of old's lease 1 must not settle o's.
	g := newTestGrantor(t)
	a := mustGrant(t, g, 0, t0, ask("p1", 40))
	req := ask("p1", 0)
	req.Return = Return{Grantor: "old", Lease: a.Lease, Unspent: 4}
	b := mustGrant(t, g, a.TAT, t0+1000*us, req)
	if b.Credited != 0 || b.TAT != a.TAT || g.Outstanding("g", "k", t0+1000*us) != 4 {
		t.Fatalf("another ledger's return settled a lease: %+v", b)
	}
}

func TestGrantor_Grant_returnAfterExpiryCreditsNothing(t *testing.T) {
	// 8 units granted at t0 expire at t0+100ms.
	for _, tc := range []struct {
		now      int64
		credited int64
	}{{t0 + 99_999*us, 8}, {t0 + 100_000*us, 0}} {
		g := newTestGrantor(t)
		a := mustGrant(t, g, 0, t0, ask("p1", 1e6))
		req := ask("p1", 0)
		req.Return = Return{Grantor: "o", Lease: a.Lease, Unspent: 8}
		b := mustGrant(t, g, a.TAT, tc.now, req)
		if b.Credited != tc.credited {
			t.Fatalf("return at t0+%dus credited %d, want %d", tc.now-t0, b.Credited, tc.credited)
		}
	}
}

func TestGrantor_expiryFoldsTheReservationIntoTheTAT(t *testing.T) {
	g := newTestGrantor(t)
	a := mustGrant(t, g, 0, t0, ask("p1", 1e6)) // 8 units, expire t0+100ms
	e := t0 + 100_000*us
	if got := g.Outstanding("g", "k", e-1*us); got != 8 {
		t.Fatalf("outstanding 1µs before expiry %d, want 8", got)
	}
	if got := g.Outstanding("g", "k", e); got != 0 {
		t.Fatalf("outstanding at expiry %d, want 0", got)
	}
	// 5ms after expiry: the key refilled from e + 8 intervals, not from
	// its TAT: the 8 units may have been spent just before e.
	if got := g.Effective("g", "k", a.TAT, e+5000*us); got != e+8000*us {
		t.Fatalf("effective after expiry %d, want %d", got, e+8000*us)
	}
	floors := g.Sweep(e + 5000*us)
	if len(floors) != 1 || floors[0] != (Floor{Group: "g", Key: "k", TAT: e + 8000*us}) {
		t.Fatalf("sweep floors %+v", floors)
	}
	if g.Stats()["lim"].ExpiredUnits != 8 || len(g.Sweep(e+5000*us)) != 0 {
		t.Fatalf("stats %+v after a second sweep", g.Stats())
	}
}

func TestGrantor_Grant_graceExtendsTheOwnersReservation(t *testing.T) {
	g, err := NewGrantor(GrantorConfig{Name: "o", Grace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mustGrant(t, g, 0, t0, ask("p1", 40))
	if g.Outstanding("g", "k", t0+100_999*us) != 4 || g.Outstanding("g", "k", t0+101_000*us) != 0 {
		t.Fatal("grace of 1ms not applied to the owner's expiry")
	}
}

func TestGrantor_Grant_badInputChangesNothing(t *testing.T) {
	g := newTestGrantor(t)
	a := mustGrant(t, g, 0, t0, ask("p1", 40)) // lease 1, 4 units
	bad := map[string]func(r *Request){
		"no peer":              func(r *Request) { r.Peer = "" },
		"no key":               func(r *Request) { r.Key = "" },
		"negative demand":      func(r *Request) { r.Demand = -1 },
		"NaN demand":           func(r *Request) { r.Demand = math.NaN() },
		"infinite demand":      func(r *Request) { r.Demand = math.Inf(1) },
		"bad limit":            func(r *Request) { r.Limit.Burst = 0 },
		"bad terms":            func(r *Request) { r.Terms.Max = 0 },
		"negative return":      func(r *Request) { r.Return = Return{Grantor: "o", Lease: a.Lease, Unspent: -1} },
		"units without lease":  func(r *Request) { r.Return = Return{Unspent: 1} },
		"more than granted":    func(r *Request) { r.Return = Return{Grantor: "o", Lease: a.Lease, Unspent: 5} },
		"another peer's lease": func(r *Request) { r.Peer = "p2"; r.Return = Return{Grantor: "o", Lease: a.Lease, Unspent: 1} },
	}
	for name, mutate := range bad {
		req := ask("p1", 40)
		mutate(&req)
		before := g.Stats()
		if _, err := g.Grant(a.TAT, t0+1000*us, req); err == nil {
			t.Errorf("%s: no error", name)
		} else if !errors.Is(err, ErrInvalidRequest) && !errors.Is(err, gcra.ErrInvalidLimit) && !errors.Is(err, ErrInvalidTerms) {
			t.Errorf("%s: error %v wraps none of the package's sentinels", name, err)
		}
		if !maps.Equal(g.Stats(), before) || g.Outstanding("g", "k", t0+1000*us) != 4 {
			t.Errorf("%s: state changed", name)
		}
	}
}

func TestGrantor_Adopt_newOwnerKeepsTheReservation(t *testing.T) {
	old := newTestGrantor(t)
	a := mustGrant(t, old, 0, t0, ask("p1", 1e6))
	now := t0 + 30_000*us
	res := old.Reservation("g", "k", now)
	if res != (Reservation{Units: 8, Until: t0 + 100_000*us}) {
		t.Fatalf("reservation %+v", res)
	}
	// The new owner loads the old owner's TAT (as persisted) and adopts.
	tat := old.Effective("g", "k", a.TAT, now)
	g := newTestGrantor(t)
	if err := g.Adopt("g", "k", lim20.Interval, res, now); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{now, t0 + 99_999*us, t0 + 100_000*us, t0 + 150_000*us} {
		if got, want := g.Effective("g", "k", tat, at), old.Effective("g", "k", a.TAT, at); got != want {
			t.Fatalf("at t0+%dus new owner's effective TAT %d, old owner's %d", at-t0, got, want)
		}
	}
	// Nobody can return an adopted reservation, and it counts to the cap.
	req := ask("p2", 1e6)
	if b := mustGrant(t, g, tat, now, req); b.Units != 2 {
		t.Fatalf("new owner granted %+v past the cap", b)
	}
	if err := g.Adopt("g", "k", 0, res, now); err == nil {
		t.Fatal("adopt with a zero interval: no error")
	}
	if n := g.Drop(func(group, key string) bool { return key == "k" }); n != 1 || g.Outstanding("g", "k", now) != 0 {
		t.Fatalf("drop removed %d ledgers", n)
	}
}

func TestGrantor_DueExpire_foldOneKey(t *testing.T) {
	cfg := DefaultGrantorConfig()
	cfg.Name, cfg.Grace = "o#1", 0
	g, _ := NewGrantor(cfg)
	lim := gcra.Limit{Interval: 10, Burst: 40}
	req := Request{Peer: "p", Group: "g", Key: "k", Limit: lim, Terms: Terms{Max: 5, TTL: 1000}, Demand: 1e12}
	a, err := g.Grant(0, 1000, req)
	if err != nil || a.Units != 5 {
		t.Fatalf("Grant = %+v, %v", a, err)
	}
	if due := g.Due(1999); len(due) != 0 {
		t.Fatalf("Due before expiry = %+v", due)
	}
	due := g.Due(2000)
	if len(due) != 1 || due[0].Key != "k" || due[0].TAT != 2000+5*10 {
		t.Fatalf("Due at expiry = %+v, want k folding to 2050", due)
	}
	if got := g.Expire("g", "k", a.TAT, 2000); got != 2050 || g.Keys() != 0 {
		t.Fatalf("Expire = %d with %d keys left; want 2050 and none", got, g.Keys())
	}
	if got := g.Expire("g", "k", 7, 2000); got != 7 {
		t.Fatalf("Expire without a ledger = %d, want the TAT back", got)
	}
}

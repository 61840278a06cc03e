package regionlink

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/region"
)

// g is the global limit of the tests' keys: 1,000/s, burst 100.
var g = gcra.Limit{Interval: int64(time.Millisecond), Burst: 100}

// tats is a TAT store for Enforce's rescale callback.
type tats map[string]int64

func (m tats) rescale(key string, f func(int64) int64) { m[key] = f(m[key]) }

// enforce runs one decision's Enforce and returns the limit given for
// key k (the only key).
func enforce(t *testing.T, l *Link, m tats, k string, cost, now int64) (gcra.Limit, bool) {
	t.Helper()
	out, ok, release := l.Enforce(1, "grp", []string{k}, defsOf([]string{k}...), []gcra.Limit{g}, cost, now, m.rescale)
	release()
	return out[0], ok
}

// rounds offers cost units on each key every interval and runs a round,
// n times.
func rounds(t *testing.T, clk *clocktest.Manual, n int, cost int64, offers map[*Link][]string) {
	t.Helper()
	for range n {
		for l, keys := range offers {
			for _, k := range keys {
				enforce(t, l, tats{}, k, cost, 0)
			}
		}
		clk.Advance(testShares().Interval)
		for l := range offers {
			l.Round(context.Background())
		}
	}
}

func mustLimit(t *testing.T, s region.Share) gcra.Limit {
	t.Helper()
	lim, ok := testShares().Limit(s, g)
	if !ok {
		t.Fatalf("share %d admits nothing", s)
	}
	return lim
}

func TestLink_Enforce_nonGlobalLimitsPassThrough(t *testing.T) {
	n, clk := newNet(), newClock()
	l := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	m := tats{}
	in := []gcra.Limit{g}
	out, ok, release := l.Enforce(1, "grp", []string{key("plain", "a")}, defsOf([]string{key("plain", "a")}...), in, 1, 0, m.rescale)
	release()
	if !ok || &out[0] != &in[0] || len(m) != 0 {
		t.Fatalf("a non-global key: ok %v, same slice %v, rescaled %v", ok, &out[0] == &in[0], m)
	}
}

func TestLink_Enforce_floorUntilGrantedThenRescaled(t *testing.T) {
	n, clk := newNet(), newClock()
	k := keyHomedIn(t, "eu", 0)
	l := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	m := tats{}
	floor := mustLimit(t, testShares().Floor)
	if lim, ok := enforce(t, l, m, k, 1, 0); !ok || lim != floor || len(m) != 0 {
		t.Fatalf("before any grant: %+v ok %v rescaled %v; want the floor %+v, no rescale", lim, ok, m, floor)
	}
	// Past the home's start-up quiet period (TTL), eu alone asks for
	// everything and is granted all but us's floor.
	rounds(t, clk, 12, 200, map[*Link][]string{l: {k}})
	want := mustLimit(t, region.Whole-testShares().Floor)
	if lim, ok := enforce(t, l, m, k, 1, 0); !ok || lim != want {
		t.Fatalf("after the grant: %+v ok %v; want %+v", lim, ok, want)
	}
	// 5 units of debt at the grant (level 85); then no round for a TTL:
	// the grant expires and the key falls to the floor, keeping its level
	// up to the floor's burst.
	now := int64(50 * time.Second)
	m[k] = now + 5*want.Interval
	clk.Advance(testShares().TTL)
	if lim, _ := enforce(t, l, m, k, 1, now); lim != floor {
		t.Fatalf("after the grant expired: %+v, want the floor %+v", lim, floor)
	}
	if got, wantTAT := m[k], region.Rescale(now+5*want.Interval, now, want, floor); got != wantTAT || got == now+5*want.Interval {
		t.Fatalf("rescaled TAT %d, want %d (the level kept, not the TAT)", got, wantTAT)
	}
	// The same share again: no second rescale.
	before := m[k]
	if enforce(t, l, m, k, 1, now); m[k] != before {
		t.Fatalf("an unchanged share rescaled the TAT from %d to %d", before, m[k])
	}
}

func TestLink_Enforce_newEpochTakesTheKeyToBeAtTheFloor(t *testing.T) {
	n, clk := newNet(), newClock()
	k := keyHomedIn(t, "eu", 0)
	l := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	rounds(t, clk, 12, 200, map[*Link][]string{l: {k}})
	floor, big := mustLimit(t, testShares().Floor), mustLimit(t, region.Whole-testShares().Floor)
	m := tats{}
	enforce(t, l, m, k, 1, 0) // epoch 1: now decided at big
	now := int64(50 * time.Second)
	m[k] = now + 5*big.Interval
	out, _, release := l.Enforce(2, "grp", []string{k}, defsOf([]string{k}...), []gcra.Limit{g}, 1, now, m.rescale)
	release()
	if want := region.Rescale(now+5*big.Interval, now, floor, big); out[0] != big || m[k] != want {
		t.Fatalf("after the epoch moved: TAT %d, want %d (read as written at the floor)", m[k], want)
	}
}

func TestLink_Round_demandFollowsOffers(t *testing.T) {
	n, clk := newNet(), newClock()
	k := keyHomedIn(t, "eu", 0)
	l := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	for range 10 { // 100 units every 100ms: 1,000/s, all of g's rate
		enforce(t, l, tats{}, k, 100, 0)
		clk.Advance(testShares().Interval)
		l.rollDemand(l.mono())
	}
	enforce(t, l, tats{}, k, 50, 0)
	d := l.rollDemand(l.mono())
	if got := d[k]; math.Abs(got-0.95) > 1e-9 {
		t.Fatalf("demand %v, want 0.95 (950 units over the last second of a 1,000/s limit)", got)
	}
}

func TestLink_twoRegions_sharesFollowDemandAndFallToTheFloorWhenCut(t *testing.T) {
	n, clk := newNet(), newClock()
	k := keyHomedIn(t, "eu", 0)
	eu := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	us := newLink(t, n, clk, "us", "us-1", func(string) string { return "us-1" })
	rounds(t, clk, 15, 200, map[*Link][]string{us: {k}, eu: {}})
	want := mustLimit(t, region.Whole-testShares().Floor)
	if lim, _ := enforce(t, us, tats{}, k, 1, 0); lim != want {
		t.Fatalf("us, the only demand: %+v, want %+v", lim, want)
	}
	eu.homeMu.Lock()
	reserved := eu.home.Reserved(k, eu.mono())
	eu.homeMu.Unlock()
	if reserved > region.Whole {
		t.Fatalf("Σ reserved %d > Whole", reserved)
	}
	// Cut us off from eu: it keeps its share until the grant's TTL, then
	// enforces its floor.
	n.cut("eu-1", true)
	rounds(t, clk, 5, 200, map[*Link][]string{us: {k}})
	if lim, _ := enforce(t, us, tats{}, k, 1, 0); lim != want {
		t.Fatalf("cut off for 500ms: %+v, want the grant %+v until its TTL", lim, want)
	}
	rounds(t, clk, 6, 200, map[*Link][]string{us: {k}})
	if lim, _ := enforce(t, us, tats{}, k, 1, 0); lim != mustLimit(t, testShares().Floor) {
		t.Fatalf("cut off past the TTL: %+v, want the floor", lim)
	}
}

func TestLink_Handle_forwardsToTheOwnerInsideTheHomeRegion(t *testing.T) {
	n, clk := newNet(), newClock()
	k := keyHomedIn(t, "eu", 0)
	other := keyHomedIn(t, "eu", 1)
	ownerOf := func(grp string) string { // k on eu-2, the rest on eu-1
		if g2, _ := group(k); grp == g2 {
			return "eu-2"
		}
		return "eu-1"
	}
	eu1 := newLink(t, n, clk, "eu", "eu-1", ownerOf)
	eu2 := newLink(t, n, clk, "eu", "eu-2", ownerOf)
	us := newLink(t, n, clk, "us", "us-1", func(string) string { return "us-1" })
	rounds(t, clk, 15, 200, map[*Link][]string{us: {k, other}})
	want := mustLimit(t, region.Whole-testShares().Floor)
	for _, key := range []string{k, other} {
		if lim, _ := enforce(t, us, tats{}, key, 1, 0); lim != want {
			t.Errorf("%s: %+v, want %+v", key, lim, want)
		}
	}
	if eu1.home.Keys() != 1 || eu2.home.Keys() != 1 {
		t.Fatalf("homes hold %d and %d keys, want 1 each (each owner its own)", eu1.home.Keys(), eu2.home.Keys())
	}
}

func TestLink_Handle_refusesBadReportsWhole(t *testing.T) {
	n, clk := newNet(), newClock()
	k := keyHomedIn(t, "eu", 0)
	eu := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-2" }) // would forward everything
	good := region.Report{From: "us", Reporter: "us-1#1", Home: "eu", Seq: 1, Items: []region.Demand{{Key: k, Demand: 0.5}}}
	bad := map[string]func(r *region.Report){
		"homed elsewhere":  func(r *region.Report) { r.Items = append(r.Items, region.Demand{Key: keyHomedIn(t, "us", 0)}) },
		"negative demand":  func(r *region.Report) { r.Items[0].Demand = -1 },
		"NaN demand":       func(r *region.Report) { r.Items[0].Demand = math.NaN() },
		"unknown region":   func(r *region.Report) { r.From = "ap" },
		"other home":       func(r *region.Report) { r.Home = "us" },
		"no reporter":      func(r *region.Report) { r.Reporter = "" },
		"key twice":        func(r *region.Report) { r.Items = append(r.Items, r.Items[0]) },
		"key without tag":  func(r *region.Report) { r.Items[0].Key = "plain" },
		"too many keys":    func(r *region.Report) { r.Items = make([]region.Demand, eu.cfg.MaxItems+1) },
		"oversized key":    func(r *region.Report) { r.Items[0].Key = string(make([]byte, eu.cfg.MaxKeyBytes+1)) },
		"oversized sender": func(r *region.Report) { r.Reporter = string(make([]byte, eu.cfg.MaxKeyBytes+1)) },
	}
	for name, mod := range bad {
		r := good
		r.Items = append([]region.Demand(nil), good.Items...)
		mod(&r)
		if _, err := eu.Handle(context.Background(), r, false); !errors.Is(err, region.ErrInvalidReport) {
			t.Errorf("%s: err %v, want ErrInvalidReport", name, err)
		}
	}
	if eu.home.Keys() != 0 || n.sent.Load() != 0 {
		t.Fatalf("bad reports changed state: home keys %d, forwards %d", eu.home.Keys(), n.sent.Load())
	}
}

func TestLink_RingChanged_newlyOwnedKeysGetTheFloorForTTLPlusGrace(t *testing.T) {
	n, clk := newNet(), newClock()
	k := keyHomedIn(t, "eu", 0)
	owner := "eu-2"
	ownerOf := func(string) string { return owner }
	eu1 := newLink(t, n, clk, "eu", "eu-1", ownerOf)
	newLink(t, n, clk, "eu", "eu-2", ownerOf)
	us := newLink(t, n, clk, "us", "us-1", func(string) string { return "us-1" })
	rounds(t, clk, 15, 200, map[*Link][]string{us: {k}})
	want := mustLimit(t, region.Whole-testShares().Floor)
	if lim, _ := enforce(t, us, tats{}, k, 1, 0); lim != want {
		t.Fatalf("before the move: %+v, want %+v", lim, want)
	}
	// k moves to eu-1, which never heard of it: eu-2's grant may still be
	// in use, so eu-1 grants us only its floor until TTL + Grace.
	owner = "eu-1"
	eu1.RingChanged()
	rounds(t, clk, 9, 200, map[*Link][]string{us: {k}})
	got := func() region.Share {
		us.memberMu.Lock()
		defer us.memberMu.Unlock()
		return us.member.Share(k, us.mono())
	}
	if s := got(); s != testShares().Floor {
		t.Fatalf("900ms after the move: share %d, want the floor %d", s, testShares().Floor)
	}
	rounds(t, clk, 3, 200, map[*Link][]string{us: {k}})
	if s := got(); s != region.Whole-testShares().Floor {
		t.Fatalf("past TTL after the move: share %d, want %d", s, region.Whole-testShares().Floor)
	}
}

func TestLink_StrictLimits_fixedEqualPartOfGlobalKeys(t *testing.T) {
	n, clk := newNet(), newClock()
	l := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	plain := gcra.Limit{Interval: 7, Burst: 3}
	in := []gcra.Limit{g, plain}
	out, ok := l.StrictLimits([]string{key("glob", "a"), key("plain", "a")}, defsOf([]string{key("glob", "a"), key("plain", "a")}...), in)
	if !ok || out[0] != mustLimit(t, region.Whole/2) || out[1] != plain || in[0] != g {
		t.Fatalf("strict limits %+v ok %v (input %+v); want half of the global one, the other untouched", out, ok, in)
	}
	tiny := gcra.Limit{Interval: int64(time.Millisecond), Burst: 1} // half a unit rounds to none
	if _, ok := l.StrictLimits([]string{key("glob", "a")}, defsOf([]string{key("glob", "a")}...), []gcra.Limit{tiny}); ok {
		t.Fatal("a part whose burst rounds to zero: ok, want a denial")
	}
}

// TestLink_Guaranteed_floorForFastFixedPartForStrict: the part a region
// holds whatever happens elsewhere is its floor of a fast global limit,
// and its fixed part of a strict one; a part of no unit is refused.
func TestLink_Guaranteed_floorForFastFixedPartForStrict(t *testing.T) {
	n, clk := newNet(), newClock()
	l := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	if got, ok := l.Guaranteed(g, false); !ok || got != mustLimit(t, testShares().Floor) {
		t.Fatalf("fast: %+v %v, want the floor's limit %+v", got, ok, mustLimit(t, testShares().Floor))
	}
	if got, ok := l.Guaranteed(g, true); !ok || got != mustLimit(t, region.Whole/2) {
		t.Fatalf("strict: %+v %v, want half of the limit", got, ok)
	}
	// A tenth of 5 units rounds to none, but every region's floor can
	// hold one of them (the unit rule): one unit at a tenth of the rate.
	small := gcra.Limit{Interval: int64(time.Millisecond), Burst: 5}
	if got, ok := l.Guaranteed(small, false); !ok || got != (gcra.Limit{Interval: 10 * int64(time.Millisecond), Burst: 1}) {
		t.Fatalf("floor of burst 5 over 2 regions: %+v %v, want one unit at a tenth of the rate", got, ok)
	}
	// A burst of 1 cannot give both regions' floors a unit.
	if _, ok := l.Guaranteed(gcra.Limit{Interval: int64(time.Millisecond), Burst: 1}, false); ok {
		t.Fatal("a floor of burst 1 over 2 regions: ok, want none")
	}
}

// TestLink_Enforce_emptyShareStillReportsDemandAndGrows: a burst of 1 over
// two regions gives no floor a unit, so us's first decisions are denied;
// they still count as demand (before, a share that admitted nothing never
// reported, and the key stayed at its floor, denied, forever). From that
// demand the home gives us the unit, and us admits.
func TestLink_Enforce_emptyShareStillReportsDemandAndGrows(t *testing.T) {
	n, clk := newNet(), newClock()
	k := keyHomedIn(t, "eu", 0)
	eu := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	us := newLink(t, n, clk, "us", "us-1", func(string) string { return "us-1" })
	one := gcra.Limit{Interval: int64(time.Millisecond), Burst: 1}
	decide := func() (gcra.Limit, bool) {
		out, ok, release := us.Enforce(1, "grp", []string{k}, defsOf([]string{k}...), []gcra.Limit{one}, 200, 0, tats{}.rescale)
		release()
		return out[0], ok
	}
	if _, ok := decide(); ok {
		t.Fatal("at the floor a burst of 1 over two regions admits: want a denial")
	}
	for range 20 { // past the home's quiet period (TTL), and a few grants
		decide()
		clk.Advance(testShares().Interval)
		us.Round(context.Background())
		eu.Round(context.Background())
	}
	lim, ok := decide()
	if !ok || lim.Burst != 1 {
		t.Fatalf("after 2s of demand: %+v ok %v, want the unit", lim, ok)
	}
	if d := us.rollDemand(us.mono()); d[k] <= 0 {
		t.Fatalf("demand %v, want the units offered though denied", d[k])
	}
}

// TestLink_Enforce_unitRegainedStartsEmpty: a key whose share held no unit
// for a while (burst 1 over two regions, us cut off from the home and at
// its floor) did not own the rate that would refill its bucket meanwhile,
// so when it holds the unit again its bucket starts empty: a Rescale from
// the limit it last held would find it rested, one unit more than the
// regions together may admit.
func TestLink_Enforce_unitRegainedStartsEmpty(t *testing.T) {
	n, clk := newNet(), newClock()
	k := keyHomedIn(t, "eu", 0)
	eu := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	us := newLink(t, n, clk, "us", "us-1", func(string) string { return "us-1" })
	one := gcra.Limit{Interval: int64(time.Millisecond), Burst: 1}
	m := tats{}
	decide := func(now int64) (gcra.Limit, bool) {
		out, ok, release := us.Enforce(1, "grp", []string{k}, defsOf([]string{k}...), []gcra.Limit{one}, 200, now, m.rescale)
		release()
		return out[0], ok
	}
	round := func() {
		clk.Advance(testShares().Interval)
		us.Round(context.Background())
		eu.Round(context.Background())
	}
	for range 20 {
		decide(0)
		round()
	}
	if _, ok := decide(0); !ok {
		t.Fatal("us never got the unit")
	}
	m[k] = 0 // rested at the share it holds
	n.cut("eu-1", true)
	for range 15 { // past the grant's TTL: the floor, no unit
		decide(0)
		round()
	}
	if _, ok := decide(0); ok {
		t.Fatal("cut off past its TTL, us still holds the unit")
	}
	n.cut("eu-1", false)
	now := int64(50 * time.Second)
	for range 20 {
		decide(now)
		round()
	}
	lim, ok := decide(now)
	if !ok || m[k] != now+lim.Span() {
		t.Fatalf("the unit regained: ok %v, TAT %d, want %d (an empty bucket)", ok, m[k], now+lim.Span())
	}
}

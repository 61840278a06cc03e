package lease

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
)

func newTestHolder(t *testing.T) *Holder {
	t.Helper()
	cfg := DefaultHolderConfig()
	cfg.Name = "p1"
	h, err := NewHolder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func ref(key string) Ref {
	return Ref{Group: "g", Key: key, Owner: "o", Limit: lim20, Terms: terms, Label: "lim"}
}

func spend(t *testing.T, h *Holder, cost, now int64, keys ...string) Verdict {
	t.Helper()
	refs := make([]Ref, len(keys))
	for i, k := range keys {
		refs[i] = ref(k)
	}
	v, err := h.Spend(refs, cost, now)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// lease gives h units on key through a refresh sent at sent and answered
// at recv. It returns the refresh.
func lease(t *testing.T, h *Holder, sent, recv int64, units map[string]int64) Refresh {
	t.Helper()
	r, ok := h.Refresh("o", sent)
	if !ok {
		t.Fatal("nothing to refresh")
	}
	rep := Reply{Owner: "o", Seq: r.Seq, Answers: make([]Answer, len(r.Items))}
	for i, it := range r.Items {
		if n := units[it.Key]; n > 0 {
			rep.Answers[i] = Answer{Outcome: Granted, Units: n, Grantor: "o", Lease: uint64(100 + i), TTL: terms.ttlNanos()}
		}
	}
	if ok, err := h.Apply(rep, recv); !ok || err != nil {
		t.Fatalf("apply: %v %v", ok, err)
	}
	return r
}

// warm records enough demand on keys for the holder to want leases.
func warm(t *testing.T, h *Holder, now int64, keys ...string) {
	t.Helper()
	for range 20 {
		// Forwarded until the demand is worth a lease, then awaiting one.
		if v := spend(t, h, 1, now, keys...); v.Outcome != Forward && v.Outcome != Await {
			t.Fatalf("spend with no lease: %+v", v)
		}
	}
}

func TestHolder_Spend_allOrNothing(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "a", "b")
	lease(t, h, t0, t0+500*us, map[string]int64{"a": 5, "b": 2})
	if v := spend(t, h, 3, t0+1000*us, "a", "b"); v.Outcome != Forward {
		t.Fatalf("b holds 2 of 3: got %+v, want forward", v)
	}
	if h.Units("a", t0+1000*us) != 5 || h.Units("b", t0+1000*us) != 2 {
		t.Fatal("a failed composite spend consumed units")
	}
	if v := spend(t, h, 2, t0+1000*us, "a", "b"); v.Outcome != Spent {
		t.Fatalf("got %+v, want spent", v)
	}
	if h.Units("a", t0+1000*us) != 3 || h.Units("b", t0+1000*us) != 0 {
		t.Fatal("a composite spend did not charge every key")
	}
	// One request on two keys of one limit counts twice.
	if s := h.Stats()["lim"]; s.SpentUnits != 4 || s.Spends != 2 || s.ReceivedUnits != 7 {
		t.Fatalf("stats %+v", s)
	}
}

func TestHolder_Spend_expiryCountsFromTheSend(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "a")
	// Sent at t0, answered 400µs later: the lease ends at t0 + TTL.
	lease(t, h, t0, t0+400*us, map[string]int64{"a": 5})
	end := t0 + terms.ttlNanos()
	if v := spend(t, h, 1, end-1, "a"); v.Outcome != Spent {
		t.Fatalf("1µs before the end: %+v", v)
	}
	// Expired with demand left: a refresh is due, not a spend.
	if v := spend(t, h, 1, end, "a"); v.Outcome != Await {
		t.Fatalf("at the end: %+v", v)
	}
	if s := h.Stats()["lim"]; s.StrandedUnits != 4 {
		t.Fatalf("stranded %d, want the 4 left at expiry", s.StrandedUnits)
	}
}

func TestHolder_Spend_refusesFromTheOwnersLastDenial(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "a", "b")
	r, _ := h.Refresh("o", t0)
	rep := Reply{Owner: "o", Seq: r.Seq, Answers: []Answer{{Outcome: Denied, RetryAfter: 500 * us}, {Outcome: Granted, Units: 5, Lease: 7, TTL: 100_000 * us}}}
	if _, err := h.Apply(rep, t0+200*us); err != nil {
		t.Fatal(err)
	}
	// Measured from the reply's arrival: one unit fits from t0+700us.
	tests := []struct {
		now, cost int64
		keys      []string
		want      Verdict
	}{
		{t0 + 499*us, 1, []string{"a"}, Verdict{Outcome: Refused, RetryAfter: 201 * us}},
		// Within one round trip (200us, this refresh's) of the end: probe.
		{t0 + 699*us, 1, []string{"a"}, Verdict{Outcome: Refused, RetryAfter: 1 * us, Probe: true}},
		{t0 + 699*us, 3, []string{"a"}, Verdict{Outcome: Refused, RetryAfter: 1*us + 2*1000*us, Probe: true}},
		{t0 + 699*us, 1, []string{"a", "b"}, Verdict{Outcome: Refused, RetryAfter: 1 * us, Probe: true}},
		{t0 + 699*us, 1, []string{"a", "c"}, Verdict{Outcome: Forward}}, // c unknown to the owner's answer
		{t0 + 699*us, 21, []string{"a"}, Verdict{Outcome: Forward}},     // beyond the burst: the owner says so
		// Past the denial, a saturated key awaits a refresh (Probe) rather
		// than forwarding; a key that was never denied is forwarded.
		{t0 + 700*us, 1, []string{"a"}, Verdict{Outcome: Await}},
	}
	for _, tt := range tests {
		if got := spend(t, h, tt.cost, tt.now, tt.keys...); got != tt.want {
			t.Errorf("at t0+%d cost %d keys %v: got %+v, want %+v", tt.now-t0, tt.cost, tt.keys, got, tt.want)
		}
	}
	if h.Units("b", t0+700*us) != 5 {
		t.Fatal("a refused composite consumed units")
	}
}

func TestHolder_NoteDenial_convertsTheRetryToOneUnit(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "a")
	// The owner denied a forwarded request of cost 3 with 2.5ms: one unit
	// fits 2ms earlier, at t0+500us.
	h.NoteDenial("a", 2500*us, 3, t0)
	if v := spend(t, h, 1, t0+499*us, "a"); v != (Verdict{Outcome: Refused, RetryAfter: 1 * us}) {
		t.Fatalf("got %+v", v)
	}
	if v := spend(t, h, 1, t0+500*us, "a"); v.Outcome != Await {
		t.Fatalf("got %+v", v)
	}
	h.NoteDenial("a", 1500, 3, t0) // the last answer: one unit already fits
	h.NoteDenial("unknown", 1500, 1, t0)
	if v := spend(t, h, 1, t0+100*us, "a"); v.Outcome != Await {
		t.Fatalf("got %+v", v)
	}
}

func TestHolder_Due_refreshesBeforeExpiry(t *testing.T) {
	h := newTestHolder(t)
	if len(h.Due(t0)) != 0 {
		t.Fatal("an empty holder is due")
	}
	warm(t, h, t0, "a")
	if d := h.Due(t0); len(d) != 1 || d[0] != "o" {
		t.Fatalf("a key with demand and no lease: due %v", d)
	}
	lease(t, h, t0, t0+300*us, map[string]int64{"a": 8})
	// 40% of 100ms left: due from t0 + 60ms.
	if d := h.Due(t0 + 59_999*us); len(d) != 0 {
		t.Fatalf("due %v with more than 40%% left", d)
	}
	if d := h.Due(t0 + 60_000*us); len(d) != 1 {
		t.Fatal("not due with 40% left")
	}
	// Used up while demand remains: due at once.
	for range 8 {
		spend(t, h, 1, t0+1000*us, "a")
	}
	if d := h.Due(t0 + 1000*us); len(d) != 1 {
		t.Fatal("an exhausted lease with demand is not due")
	}
}

func TestHolder_Refresh_returnsUnspentAndIgnoresStaleReplies(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "a")
	first := lease(t, h, t0, t0+300*us, map[string]int64{"a": 8})
	spend(t, h, 3, t0+1000*us, "a")
	r, ok := h.Refresh("o", t0+2000*us)
	if !ok || len(r.Items) != 1 || r.Items[0].Return != (Return{Grantor: "o", Lease: 100, Unspent: 5}) || r.Items[0].Peer != "p1" {
		t.Fatalf("refresh %+v", r)
	}
	if r.Items[0].Demand <= 0 {
		t.Fatal("refresh carries no demand")
	}
	if h.Units("a", t0+2000*us) != 0 {
		t.Fatal("returned units are still spendable")
	}
	if _, again := h.Refresh("o", t0+2001*us); again {
		t.Fatal("a second refresh while one is in flight")
	}
	stale := Reply{Owner: "o", Seq: first.Seq, Answers: []Answer{{Outcome: Granted, Units: 8, Lease: 9, TTL: 100_000}}}
	if ok, err := h.Apply(stale, t0+2100*us); ok || err != nil || h.Units("a", t0+2100*us) != 0 {
		t.Fatal("a stale reply was applied")
	}
	h.Abandon("o", r.Seq)
	late := Reply{Owner: "o", Seq: r.Seq, Answers: []Answer{{Outcome: Granted, Units: 8, Lease: 9, TTL: 100_000}}}
	if ok, _ := h.Apply(late, t0+2200*us); ok || h.Units("a", t0+2200*us) != 0 {
		t.Fatal("a reply to an abandoned refresh was applied")
	}
	s := h.Stats()["lim"]
	if s.ReturnedUnits != 5 || s.LostUnits != 5 || h.IgnoredReplies() != 2 {
		t.Fatalf("stats %+v", s)
	}
	r2, _ := h.Refresh("o", t0+3000*us)
	if _, err := h.Apply(Reply{Owner: "o", Seq: r2.Seq}, t0+3100*us); err == nil {
		t.Fatal("a reply with no answers for one item: no error")
	}
}

func TestHolder_Refresh_quietKeysOnlyReturn(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "a")
	lease(t, h, t0, t0+300*us, map[string]int64{"a": 8})
	// Ten half-lives later the demand is ~0: the refresh only returns.
	now := t0 + 10*time.Second.Nanoseconds()
	h.keys["a"].expires = now + 1*us // keep the lease alive for this test
	r, ok := h.Refresh("o", now)
	if !ok || r.Items[0].Demand != 0 || r.Items[0].Return.Unspent != 8 {
		t.Fatalf("refresh %+v", r)
	}
	h.Abandon("o", r.Seq)
	h.Sweep(now + time.Second.Nanoseconds())
	if _, ok := h.keys["a"]; ok {
		t.Fatal("an idle key holding nothing was not forgotten")
	}
	// Nothing names the owner any more: its round trips and its failure
	// mark (the abandoned refresh) go too.
	if len(h.rtt) != 0 || len(h.failing) != 0 {
		t.Fatalf("owner state kept for a gone owner: %d round trips, %d failure marks", len(h.rtt), len(h.failing))
	}
}

func TestHolder_Demand_ewma(t *testing.T) {
	h := newTestHolder(t)
	for range 100 {
		spend(t, h, 1, t0, "a")
	}
	want := 100 * math.Ln2 // units per second right after 100 units
	if got := h.Demand("a", t0); math.Abs(got-want) > 1e-9 {
		t.Fatalf("demand %v, want %v", got, want)
	}
	if got := h.Demand("a", t0+time.Second.Nanoseconds()); math.Abs(got-want/2) > 1e-9 {
		t.Fatalf("demand after a half-life %v, want %v", got, want/2)
	}
	if got := h.Demand("a", t0-5*us); math.Abs(got-want) > 1e-9 {
		t.Fatalf("a clock going backwards changed demand: %v", got)
	}
}

func TestHolder_Spend_badInputChangesNothing(t *testing.T) {
	h := newTestHolder(t)
	bad := map[string]func() ([]Ref, int64){
		"zero cost": func() ([]Ref, int64) { return []Ref{ref("a")}, 0 },
		"no keys":   func() ([]Ref, int64) { return nil, 1 },
		"no owner":  func() ([]Ref, int64) { r := ref("a"); r.Owner = ""; return []Ref{r}, 1 },
		"duplicate": func() ([]Ref, int64) { return []Ref{ref("a"), ref("b"), ref("a")}, 1 },
		"bad limit": func() ([]Ref, int64) { r := ref("a"); r.Limit = gcra.Limit{}; return []Ref{r}, 1 },
		"bad terms": func() ([]Ref, int64) { r := ref("a"); r.Terms = Terms{}; return []Ref{ref("b"), r}, 1 },
	}
	for name, mk := range bad {
		refs, cost := mk()
		if _, err := h.Spend(refs, cost, t0); err == nil {
			t.Errorf("%s: no error", name)
		} else if !errors.Is(err, ErrInvalidRequest) && !errors.Is(err, gcra.ErrInvalidLimit) && !errors.Is(err, ErrInvalidTerms) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(h.keys) != 0 || len(h.Stats()) != 0 {
		t.Fatal("bad input changed state")
	}
}

func TestHolderConfig_Validate(t *testing.T) {
	ok := DefaultHolderConfig()
	ok.Name = "n"
	for name, mutate := range map[string]func(c *HolderConfig){
		"no name":          func(c *HolderConfig) { c.Name = "" },
		"zero half-life":   func(c *HolderConfig) { c.HalfLife = 0 },
		"refresh at 1":     func(c *HolderConfig) { c.RefreshWhenLeft = 1 },
		"refresh NaN":      func(c *HolderConfig) { c.RefreshWhenLeft = math.NaN() },
		"zero min units":   func(c *HolderConfig) { c.MinUnits = 0 },
		"zero idle-after":  func(c *HolderConfig) { c.IdleAfter = 0 },
		"infinite minimum": func(c *HolderConfig) { c.MinUnits = math.Inf(1) },
	} {
		c := ok
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("%s: valid", name)
		}
	}
	if ok.Validate() != nil || (GrantorConfig{Name: "o", Grace: -1}).Validate() == nil || (GrantorConfig{}).Validate() == nil {
		t.Fatal("config validation")
	}
}

func TestHolder_Spend_doesNotAllocate(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "a", "b")
	lease(t, h, t0, t0, map[string]int64{"a": 8, "b": 8})
	refs := []Ref{ref("a"), ref("b")}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := h.Spend(refs, 1, t0+1*us); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Spend allocates %v times per call", allocs)
	}
}

// A grant that leaves the key at its edge is spent, then the key is
// refused until the owner's next unit (measured from the reply's arrival),
// then awaits a refresh: Probe carries only the due keys, and Resume after
// its reply spends the new grant without counting the demand again.
func TestHolder_saturatedKeyAwaitsAProbe(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "a", "b")
	r, _ := h.Refresh("o", t0)
	rep := Reply{Owner: "o", Seq: r.Seq, Answers: []Answer{
		{Outcome: Granted, Units: 2, Grantor: "o", Lease: 1, TTL: terms.ttlNanos(), RetryAfter: 800 * us}, // a: at the edge
		{Outcome: Granted, Units: 5, Grantor: "o", Lease: 2, TTL: terms.ttlNanos()},                       // b: room left
	}}
	if _, err := h.Apply(rep, t0+200*us); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		now  int64
		keys []string
		want Verdict
	}{
		{t0 + 300*us, []string{"a"}, Verdict{Outcome: Spent}},
		{t0 + 300*us, []string{"a"}, Verdict{Outcome: Spent}},
		{t0 + 300*us, []string{"a"}, Verdict{Outcome: Refused, RetryAfter: 700 * us}},
		{t0 + 799*us, []string{"a", "b"}, Verdict{Outcome: Refused, RetryAfter: 201 * us}},
		// One round trip (200us) before one unit fits: refused, and probe.
		{t0 + 800*us, []string{"a", "b"}, Verdict{Outcome: Refused, RetryAfter: 200 * us, Probe: true}},
		{t0 + 1000*us, []string{"a", "b"}, Verdict{Outcome: Await}},
	}
	for i, s := range steps {
		if got := spend(t, h, 1, s.now, s.keys...); got != s.want {
			t.Fatalf("step %d at t0+%dus: got %+v, want %+v", i, (s.now-t0)/us, got, s.want)
		}
	}
	if h.Units("b", t0+1000*us) != 5 {
		t.Fatal("refused or awaiting composites consumed units of b")
	}
	if !h.InFlight("o") {
		p, ok := h.Probe("o", t0+1000*us)
		if !ok || len(p.Items) != 1 || p.Items[0].Key != "a" || p.Items[0].Return.Lease != 1 {
			t.Fatalf("probe %+v, %v: want only a, returning lease 1", p, ok)
		}
		demand := h.Demand("a", t0+1000*us)
		if _, err := h.Apply(Reply{Owner: "o", Seq: p.Seq, Answers: []Answer{{Outcome: Granted, Units: 1, Grantor: "o", Lease: 3, TTL: terms.ttlNanos(), RetryAfter: 1000 * us}}}, t0+1200*us); err != nil {
			t.Fatal(err)
		}
		refs := []Ref{ref("a"), ref("b")}
		if v, _ := h.Resume(refs, 1, t0+1200*us, true); v.Outcome != Spent {
			t.Fatalf("resume after the probe: %+v", v)
		}
		if v, _ := h.Resume(refs, 1, t0+1200*us, true); v != (Verdict{Outcome: Refused, RetryAfter: 1000 * us}) {
			t.Fatalf("second resume: %+v", v)
		}
		if got := h.Demand("a", t0+1000*us); got != demand {
			t.Fatalf("resume counted demand: %v, was %v", got, demand)
		}
	} else {
		t.Fatal("a refresh in flight before any was sent")
	}
	// Patience ran out: Resume without waiting forwards, and counts it.
	before := h.Stats()["lim"].Forwards
	if v, _ := h.Resume([]Ref{ref("a")}, 1, t0+2200*us, false); v.Outcome != Forward {
		t.Fatalf("resume that may not wait: %+v", v)
	}
	if h.Stats()["lim"].Forwards != before+1 {
		t.Fatal("the forward was not counted")
	}
}

func TestHolder_Apply_busyWithRetryAfterShortensThePause(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "a", "b")
	r, _ := h.Refresh("o", t0)
	rep := Reply{Owner: "o", Seq: r.Seq, Answers: []Answer{{Outcome: Busy}, {Outcome: Busy, RetryAfter: 10_000 * us}}}
	if _, err := h.Apply(rep, t0); err != nil {
		t.Fatal(err)
	}
	// a pauses 40% of its 100ms TTL; b only the 10ms it was told.
	for _, s := range []struct {
		now  int64
		want bool
	}{{t0 + 9_999*us, false}, {t0 + 10_000*us, true}} {
		r, ok := h.Refresh("o", s.now)
		if ok != s.want || (ok && (len(r.Items) != 1 || r.Items[0].Key != "b")) {
			t.Fatalf("at t0+%dus: refresh %+v, %v; want only b after 10ms", (s.now-t0)/us, r.Items, ok)
		}
	}
}

func TestHolder_usedUpKeyWithDemandAwaitsAProbe(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "a")
	lease(t, h, t0, t0+100*us, map[string]int64{"a": 1})
	if v := spend(t, h, 1, t0+200*us, "a"); v.Outcome != Spent {
		t.Fatalf("got %+v", v)
	}
	// Used up while demand remains: wait for one probe, not a hop each.
	if v := spend(t, h, 1, t0+200*us, "a"); v.Outcome != Await {
		t.Fatalf("used up with demand: got %+v, want await", v)
	}
	if v, _ := h.Resume([]Ref{ref("a")}, 1, t0+200*us, false); v.Outcome != Forward {
		t.Fatalf("used up, may not wait: got %+v, want a forward", v)
	}
}

// A refresh returns a key's units when it is sent; until its answer the
// key's requests await it instead of forwarding, and its grant pays them.
func TestHolder_requestsDuringARefreshAwaitIt(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "a")
	lease(t, h, t0, t0+100*us, map[string]int64{"a": 10})
	r, ok := h.Refresh("o", t0+1000*us)
	if !ok || len(r.Items) != 1 || r.Items[0].Return.Unspent != 10 {
		t.Fatalf("refresh %+v, %v: want a's 10 units back", r, ok)
	}
	if v := spend(t, h, 1, t0+1100*us, "a"); v.Outcome != Await {
		t.Fatalf("during the refresh: got %+v, want await", v)
	}
	if _, err := h.Apply(Reply{Owner: "o", Seq: r.Seq, Answers: []Answer{{Outcome: Granted, Units: 3, Grantor: "o", Lease: 7, TTL: terms.ttlNanos()}}}, t0+1200*us); err != nil {
		t.Fatal(err)
	}
	if v, _ := h.Resume([]Ref{ref("a")}, 1, t0+1200*us, true); v.Outcome != Spent {
		t.Fatalf("after the grant: got %+v, want spent", v)
	}
	// An abandoned refresh (a slow or unreachable owner) holds nobody:
	// requests forward until a refresh to the owner is answered again.
	r, _ = h.Refresh("o", t0+2000*us)
	h.Abandon("o", r.Seq)
	if v := spend(t, h, 1, t0+2000*us, "a"); v.Outcome != Forward {
		t.Fatalf("after an abandoned refresh: got %+v, want a forward", v)
	}
	lease(t, h, t0+3000*us, t0+3100*us, map[string]int64{"a": 1})
	spend(t, h, 1, t0+3200*us, "a")
	if v := spend(t, h, 1, t0+3200*us, "a"); v.Outcome != Await {
		t.Fatalf("after an answered refresh, used up: got %+v, want await", v)
	}
}

// A saturated key's probe leaves the shortest recent round trip before the
// owner's denial ends, not the average: one slow reply among fast ones
// must not make the next probes reach the owner before the unit fits.
func TestHolder_probeLeadsByTheShortestRecentRoundTrip(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "a")
	at := t0
	for i, rtt := range []int64{200 * us, 200 * us, 200 * us, 2000 * us} {
		r, ok := h.Refresh("o", at)
		if !ok {
			t.Fatalf("refresh %d not sent", i)
		}
		a := Answer{Outcome: Settled}
		if i == 3 {
			a = Answer{Outcome: Denied, RetryAfter: 1000 * us}
		}
		if _, err := h.Apply(Reply{Owner: "o", Seq: r.Seq, Answers: []Answer{a}}, at+rtt); err != nil {
			t.Fatal(err)
		}
		at += rtt
	}
	end := at + 1000*us // the denial, measured from its arrival
	if d := h.Due(end - 201*us); len(d) != 0 {
		t.Fatalf("due %v more than the shortest round trip (200us) before the denial ends", d)
	}
	if d := h.Due(end - 200*us); len(d) != 1 {
		t.Fatalf("not due one shortest round trip before the denial ends: %v", d)
	}
}

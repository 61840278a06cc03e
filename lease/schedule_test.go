package lease

import (
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
)

// scheduledAsk is a saturated peer's ask, from a peer that honours
// scheduled grants.
func scheduledAsk(peer string) Request {
	r := ask(peer, 1000)
	r.Scheduled = true
	return r
}

// At a key whose burst is spent, a peer that honours schedules is granted
// units for later: the j-th spendable exactly when GCRA would have
// admitted it, all charged to the TAT now; the next unit after them is the
// grant's retry-after. A peer that does not is denied as before.
func TestGrantor_Grant_schedulesUnitsAtASaturatedKey(t *testing.T) {
	full := t0 + lim20.Span() // nothing fits at t0; one unit at t0 + 1ms
	old := mustGrant(t, newTestGrantor(t), full, t0, ask("p1", 1000))
	if old.Outcome != Denied || old.RetryAfter != 1000*us || old.Spacing != 0 {
		t.Fatalf("unscheduled ask at a full key: %+v, want denied for 1ms", old)
	}
	g := newTestGrantor(t)
	a := mustGrant(t, g, full, t0, scheduledAsk("p1"))
	if a.Outcome != Granted || a.Units != 8 || a.Start != 1000*us || a.Spacing != lim20.Interval {
		t.Fatalf("scheduled ask: %+v, want 8 units from 1ms, 1ms apart", a)
	}
	if a.TAT != full+8*lim20.Interval || a.RetryAfter != 9000*us {
		t.Fatalf("TAT %d (want %d), retry-after %d (want 9ms): charged like 8 units", a.TAT-t0, full+8*lim20.Interval-t0, a.RetryAfter)
	}
	for j := range a.Units {
		at := t0 + a.Start + j*a.Spacing
		if r, _ := gcra.Decide(full, at, lim20, j+1); !r.Allowed {
			t.Fatalf("unit %d at %dµs: GCRA would not admit %d units yet", j, (at-t0)/us, j+1)
		}
		if r, _ := gcra.Decide(full, at-1, lim20, j+1); r.Allowed {
			t.Fatalf("unit %d at %dµs: GCRA admitted %d units a nanosecond earlier", j, (at-t0)/us, j+1)
		}
	}
	// The owner's own callers, and other peers, come after the schedule.
	if r, _ := gcra.Decide(g.Effective("g", "k", a.TAT, t0+8000*us), t0+8000*us, lim20, 1); r.Allowed || r.RetryAfter != 1000*us {
		t.Fatalf("a direct decision at the schedule's last unit: %+v, want denied until 9ms", r)
	}
}

// Every unit of a schedule is spendable within half the TTL; a key whose
// next unit is further than that is denied; units that fit at once lead
// the schedule (a negative start).
func TestGrantor_Grant_scheduleFitsInHalfTheTTL(t *testing.T) {
	short := scheduledAsk("p1")
	short.Terms.TTL = 10 * time.Millisecond
	a := mustGrant(t, newTestGrantor(t), t0+lim20.Span(), t0, short)
	if a.Outcome != Granted || a.Units != 5 || a.Start+(a.Units-1)*a.Spacing != 5000*us {
		t.Fatalf("10ms TTL: %+v, want 5 units, the last at 5ms", a)
	}
	if a := mustGrant(t, newTestGrantor(t), t0+lim20.Span()+5000*us, t0, short); a.Outcome != Denied || a.RetryAfter != 6000*us {
		t.Fatalf("next unit at 6ms, past half the TTL: %+v, want denied for 6ms", a)
	}
	a = mustGrant(t, newTestGrantor(t), t0+18000*us, t0, scheduledAsk("p1"))
	if a.Outcome != Granted || a.Units != 8 || a.Start != -1000*us || a.TAT != t0+26000*us {
		t.Fatalf("two units fit now: %+v, want 8 from -1ms", a)
	}
}

// Returning a schedule's units before their time credits all of them: the
// TAT goes back to where the grant found it, and the next schedule starts
// where the returned one did.
func TestGrantor_Grant_returnOfFutureUnitsCreditsThem(t *testing.T) {
	g := newTestGrantor(t)
	full := t0 + lim20.Span()
	a := mustGrant(t, g, full, t0, scheduledAsk("p1"))
	back := scheduledAsk("p1")
	back.Return = Return{Grantor: "o", Lease: a.Lease, Unspent: a.Units}
	b := mustGrant(t, g, a.TAT, t0+500*us, back)
	if b.Credited != 8 || b.Outcome != Granted || b.TAT != a.TAT || t0+500*us+b.Start != t0+a.Start {
		t.Fatalf("return of 8 future units and a new ask: %+v, want 8 credited and the same schedule", b)
	}
}

// scheduledLease has h hold units under a schedule: a refresh sent at
// sent and answered at recv, the first unit start after recv, the next
// ones spacing apart.
func scheduledLease(t *testing.T, h *Holder, sent, recv, units, start, spacing, retry int64) {
	t.Helper()
	r, ok := h.Refresh("o", sent)
	if !ok || !r.Items[0].Scheduled {
		t.Fatalf("refresh %+v, %v: want one item asking for schedules", r, ok)
	}
	rep := Reply{Owner: "o", Seq: r.Seq, Answers: []Answer{{Outcome: Granted, Units: units, Grantor: "o", Lease: 7,
		TTL: terms.ttlNanos(), Start: start, Spacing: spacing, RetryAfter: retry}}}
	if ok, err := h.Apply(rep, recv); !ok || err != nil {
		t.Fatalf("apply: %v %v", ok, err)
	}
}

// The holder never spends a scheduled unit before its time, measured from
// the answer's arrival: a nanosecond early it refuses with the exact wait,
// at its time it spends. A request of cost c waits for the c-th next unit.
func TestHolder_Spend_scheduledUnitNotBeforeItsTime(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "k")
	recv := t0 + 300*us
	scheduledLease(t, h, t0, recv, 3, 1000*us, 1000*us, 4000*us)
	for _, c := range []struct {
		at, cost int64
		want     SpendOutcome
		retry    int64
	}{
		{recv + 1000*us - 1, 1, Refused, 1},
		{recv + 1000*us, 1, Spent, 0},
		{recv + 1000*us, 1, Refused, 1000 * us},
		{recv + 2000*us, 2, Refused, 1000 * us},
		{recv + 3000*us - 1, 2, Refused, 1},
		{recv + 3000*us, 2, Spent, 0},
		{recv + 3000*us, 1, Refused, 1000 * us}, // used up: the grant's retry-after
	} {
		ready := h.Ready("k", c.at)
		v := spend(t, h, c.cost, c.at, "k")
		if (ready >= c.cost) != (v.Outcome == Spent) {
			t.Fatalf("cost %d at recv+%dns: %d ready, verdict %+v", c.cost, c.at-recv, ready, v)
		}
		if v.Outcome != c.want || v.RetryAfter != c.retry {
			t.Fatalf("cost %d at recv+%dns: %+v, want %v with retry-after %dns", c.cost, c.at-recv, v, c.want, c.retry)
		}
	}
}

// A scheduled unit whose time falls at or after the lease's end is not
// payable: the request is not refused on the strength of it.
func TestHolder_Spend_scheduledUnitPastTheLeaseIsNotHeld(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "k")
	end := t0 + terms.ttlNanos()
	scheduledLease(t, h, t0, t0+100*us, 2, terms.ttlNanos()-1000*us, 1000*us, 0)
	if v := spend(t, h, 1, end-900*us, "k"); v.Outcome != Spent {
		t.Fatalf("first unit, before the end: %+v", v)
	}
	if v := spend(t, h, 1, end-500*us, "k"); v.Outcome == Spent || v.Outcome == Refused {
		t.Fatalf("second unit, due after the end: %+v, want forward or await", v)
	}
}

// An ordinary grant has no times: all of it is spendable at once, even by
// a request stamped before the answer arrived.
func TestHolder_Spend_ordinaryGrantHasNoSchedule(t *testing.T) {
	h := newTestHolder(t)
	warm(t, h, t0, "k")
	lease(t, h, t0, t0+300*us, map[string]int64{"k": 3})
	if v := spend(t, h, 3, t0+200*us, "k"); v.Outcome != Spent || h.Ready("k", t0+200*us) != 0 {
		t.Fatalf("3 of 3 units of an ordinary grant: %+v", v)
	}
}

package checker

import (
	"testing"
	"time"

	"github.com/weirhq/weir/chaos/history"
)

// leasable is a fast limit with lease terms and the default failure policy
// (the chaos workload's leasable class).
func leasable() history.LimitSpec {
	l := fast("lease", 100*time.Millisecond, 5)
	l.OnFailure, l.Default, l.FallbackShare = "local", true, true
	l.LeaseMax, l.LeaseTTL = 2, 250*time.Millisecond
	return l
}

// TestLeasableLimit_noAllowanceForLeases: a leasable limit is held to
// B + W/T exactly, with no term for leases: GCRA's admissions pass, one
// unit more fails, whatever the lease counters say, and the fault terms
// apply as to any fast limit.
func TestLeasableLimit_noAllowanceForLeases(t *testing.T) {
	h := exact(leasable(), 3*sec)
	h.Events = append(h.Events, history.Event{Time: t0 + 3*sec, Kind: history.Leases,
		Leases: map[string]history.LeaseCounts{"lease": {Granted: 20, Received: 20, Spent: 18, Stranded: 2}}})
	mustPass(t, Check(h, DefaultConfig()))

	h.Ops = append(h.Ops, history.Op{ID: 999, Node: "n2", Invoke: t0 + 550*ms, Complete: t0 + 550*ms, Cost: 1,
		Limits: keys("lease", "k1"), Outcome: history.Allowed})
	h.Sort()
	r := Check(h, DefaultConfig())
	mustFail(t, r, `limit "lease" key "k1": 16 units admitted in window [0.000s, +1s], allowance 15 (bound 15)`)
	if w := r.Limits[0].Worst; w.Allowance != 15 || w.FallbackAllowance != 0 {
		t.Errorf("worst window %+v: allowance must be B + W/T and nothing more", w)
	}

	// A fault that may split ownership doubles it, as for any fast limit.
	h.Events = append(h.Events, event(0, history.FaultStart, 1, "partition-node", 2, false),
		event(2*sec, history.FaultEnd, 1, "partition-node", 0, false))
	h.Sort()
	mustPass(t, Check(h, DefaultConfig()))
}

// TestLeaseResults_reportCountersBesideAdmissions: the Leases event's
// counters are reported per leasable limit with the admitted units, the
// share admitted from leases, the hit ratio and the stranded units; they
// never change the verdict.
func TestLeaseResults_reportCountersBesideAdmissions(t *testing.T) {
	other := fast("other", 100*time.Millisecond, 5)
	h := exact(leasable(), 2*sec)
	counts := history.LeaseCounts{Granted: 12, Credited: 2, Expired: 3, Received: 11, Spent: 5, Returned: 2, Stranded: 3, Lost: 1,
		SpentDecisions: 5, RefusedDecisions: 25, ForwardedDecisions: 10}
	h.Header.Limits = append(h.Header.Limits, other)
	h.Events = append(h.Events,
		history.Event{Time: t0 + sec, Kind: history.Leases, Leases: map[string]history.LeaseCounts{"lease": {Granted: 1}}},
		history.Event{Time: t0 + 2*sec, Kind: history.Leases, Detail: "final", Leases: map[string]history.LeaseCounts{"lease": counts}})
	r := Check(h, DefaultConfig())
	mustPass(t, r)
	if len(r.Leases) != 1 {
		t.Fatalf("leases %+v, want one entry (the leasable limit only)", r.Leases)
	}
	l := r.Leases[0]
	if l.Limit != "lease" || !l.Read || l.Detail != "final" || l.Counts != counts {
		t.Fatalf("lease result %+v, want the last event's counters", l)
	}
	// 5 at once, then one every 100ms until 1.99s.
	if l.Admitted != 24 || l.Admitted != r.Limits[0].Admitted {
		t.Errorf("admitted %d, want 24 (the limit's)", l.Admitted)
	}
	if l.Stranded() != 4 || l.FromLeases() != 5.0/24 || l.HitRatio() != 30.0/40 {
		t.Errorf("stranded %d from leases %v hit ratio %v, want 4, 5/24, 0.75", l.Stranded(), l.FromLeases(), l.HitRatio())
	}

	// No Leases event (a run stopped early): the limit is listed, unread.
	h.Events = nil
	r = Check(h, DefaultConfig())
	if len(r.Leases) != 1 || r.Leases[0].Read || r.Leases[0].FromLeases() != 0 || r.Leases[0].HitRatio() != 0 {
		t.Errorf("without counters: %+v", r.Leases)
	}
}

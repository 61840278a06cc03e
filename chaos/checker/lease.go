package checker

import "github.com/weirhq/weir/chaos/history"

// LeaseResult is what leasing did for one leasable limit in a run: the
// nodes' lease counters (the history's Leases event) beside what the
// history says the limit admitted. It is reported, never judged: a
// leasable limit's windows are held to B + W/T like any other limit's
// (leases add no term), and units stranded in leases were never admitted,
// so they are under-admission.
type LeaseResult struct {
	Limit string
	// Counts are the counters summed over every node and process; Read is
	// false when the history holds no Leases event (a run stopped early),
	// and Detail is the event's note on how they were read.
	Counts history.LeaseCounts
	Read   bool
	Detail string
	// Admitted is the units of the limit the history shows admitted
	// (fallback included); its windows are in its LimitResult.
	Admitted int64
}

// Stranded is the units peers never spent nor gave back: left unspent at
// expiry, or returned in a refresh that failed. A peer killed with units in
// hand never counts them; its owner's Expired count does.
func (l LeaseResult) Stranded() int64 { return l.Counts.Stranded + l.Counts.Lost }

// FromLeases is the share of the admitted units that peers admitted from
// their leases (0 when nothing was admitted).
func (l LeaseResult) FromLeases() float64 {
	if l.Admitted <= 0 {
		return 0
	}
	return float64(l.Counts.Spent) / float64(l.Admitted)
}

// HitRatio is the share of the limit's decisions at non-owners that were
// made from leases (spent, or refused from the owner's last denial) rather
// than forwarded; 0 when there were none.
func (l LeaseResult) HitRatio() float64 {
	c := l.Counts
	all := c.SpentDecisions + c.RefusedDecisions + c.ForwardedDecisions
	if all == 0 {
		return 0
	}
	return float64(c.SpentDecisions+c.RefusedDecisions) / float64(all)
}

// leaseResults fills r.Leases: one entry per limit the header declares
// leasable or the Leases event (the last, if several) names. Counters of
// limits the header does not declare are left out.
func (c *checker) leaseResults() {
	var ev *history.Event
	for i := range c.h.Events {
		if c.h.Events[i].Kind == history.Leases {
			ev = &c.h.Events[i]
		}
	}
	for _, l := range c.r.Limits {
		counts, named := history.LeaseCounts{}, false
		if ev != nil {
			counts, named = ev.Leases[l.Spec.Name]
		}
		if l.Spec.LeaseMax <= 0 && !named {
			continue
		}
		lr := LeaseResult{Limit: l.Spec.Name, Counts: counts, Read: ev != nil, Admitted: l.Admitted}
		if ev != nil {
			lr.Detail = ev.Detail
		}
		c.r.Leases = append(c.r.Leases, lr)
	}
}

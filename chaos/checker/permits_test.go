package checker

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/chaos/history"
)

func concurrency(name string, n int64, ttl time.Duration) history.LimitSpec {
	return history.LimitSpec{Name: name, Interval: ttl, Burst: n, Consistency: "fast", OnFailure: "closed",
		MaxInFlight: n, PermitTTL: ttl}
}

// ownerModel is a naive permit owner: a map of live permits, each with
// its expiry, decided at explicit times. extra admits that many units
// beyond the bound (an over-admitting owner); leak makes expired permits
// stay (an owner that never gives crashed callers' slots back).
type ownerModel struct {
	n, extra int64
	ttl      int64
	leak     bool
	live     map[int64]int64 // op id -> expiry
	cost     map[int64]int64
}

func (m *ownerModel) used(now int64) int64 {
	var u int64
	for id, exp := range m.live {
		if exp <= now && !m.leak {
			delete(m.live, id)
			continue
		}
		u += m.cost[id]
	}
	return u
}

// ownerStep is one owner-side step of the simulation, applied in time order.
type ownerStep struct {
	at   int64
	kind int // 0 acquire, 1 renew, 2 release
	id   int64
	op   *history.Op
}

// simulate runs clients against m: acquires every ~20 ms for dur on one
// key, holds of 50 ms-1 s, a crash share and a renew share, with random
// latency on each side of every call.
func simulate(m *ownerModel, seed uint64, dur int64, crash, renew float64) *history.History {
	rng := rand.New(rand.NewPCG(seed, 7))
	spec := concurrency("conc", m.n, time.Duration(m.ttl))
	h := newHistory(spec)
	m.live, m.cost = map[int64]int64{}, map[int64]int64{}
	lat := func() int64 { return rng.Int64N(20 * ms) }
	var evs []ownerStep
	for t, id := t0, int64(1); t < t0+dur; t, id = t+rng.Int64N(40*ms)+1, id+1 {
		op := &history.Op{ID: id, Node: "n1", Class: "conc", Cost: 1, Invoke: t,
			Limits: []history.LimitKey{{Name: "conc", Key: "k"}}, Permit: &history.PermitLife{}}
		dec := t + lat()
		op.Complete = dec + lat()
		h.Ops = append(h.Ops, *op)
		evs = append(evs, ownerStep{at: dec, kind: 0, id: id})
	}
	// Decide in time order; schedule the follow-up calls of the admitted.
	for len(evs) > 0 {
		i := 0
		for j := range evs {
			if evs[j].at < evs[i].at {
				i = j
			}
		}
		ev := evs[i]
		evs = append(evs[:i], evs[i+1:]...)
		op := &h.Ops[ev.id-1]
		switch ev.kind {
		case 0:
			if m.used(ev.at)+op.Cost > m.n+m.extra {
				op.Outcome = history.Denied
				op.Limits[0].Denied = true
				continue
			}
			op.Outcome, op.Permit.Granted = history.Allowed, true
			m.live[ev.id], m.cost[ev.id] = ev.at+m.ttl, op.Cost
			x := rng.Float64()
			if x < crash {
				op.Permit.Crashed = true
				continue
			}
			hold := 50*ms + rng.Int64N(950*ms)
			if x < crash+renew {
				op.Permit.RenewInvoke = op.Complete + hold/2
				at := op.Permit.RenewInvoke + lat()
				op.Permit.RenewComplete = at + lat()
				evs = append(evs, ownerStep{at: at, kind: 1, id: ev.id})
				hold = op.Permit.RenewComplete - op.Complete + hold/2
			}
			op.Permit.ReleaseInvoke = op.Complete + hold
			at := op.Permit.ReleaseInvoke + lat()
			op.Permit.ReleaseComplete = at + lat()
			evs = append(evs, ownerStep{at: at, kind: 2, id: ev.id})
		case 1:
			_, ok := m.live[ev.id]
			if ok && (m.leak || m.live[ev.id] > ev.at) {
				m.live[ev.id] = ev.at + m.ttl
				op.Permit.Renewed = true
			}
		case 2:
			if exp, ok := m.live[ev.id]; ok && (m.leak || exp > ev.at) {
				delete(m.live, ev.id)
				op.Permit.Released = true
			}
		}
	}
	return h
}

func TestCheckPermits_exactOwnerPasses(t *testing.T) {
	for seed := range uint64(20) {
		m := &ownerModel{n: 5, ttl: 2 * sec}
		h := simulate(m, seed, 20*sec, 0.1, 0.05)
		r := Check(h, DefaultConfig())
		p := r.Limits[0].Permits
		if !r.OK() || p == nil {
			t.Fatalf("seed %d: an exact owner failed: %v %v", seed, r.Violations, r.Errors)
		}
		if p.Granted == 0 || p.Crashed == 0 || p.Released == 0 || p.Judged == 0 {
			t.Fatalf("seed %d: the history exercised too little: %+v", seed, *p)
		}
		if p.MaxHeld > 5 {
			t.Fatalf("seed %d: max held %d > 5 yet passed", seed, p.MaxHeld)
		}
	}
}

func TestCheckPermits_overAdmittingOwnerFails(t *testing.T) {
	caught := 0
	for seed := range uint64(20) {
		m := &ownerModel{n: 5, extra: 1, ttl: 2 * sec}
		r := Check(simulate(m, seed, 20*sec, 0.1, 0.05), DefaultConfig())
		if !r.OK() {
			caught++
			if !strings.Contains(strings.Join(r.Violations, "\n"), "surely held") {
				t.Fatalf("seed %d: failed for the wrong reason: %v", seed, r.Violations)
			}
		}
	}
	// The sixth unit is surely held only when its grant's answer and
	// another's overlap; most saturated histories show it.
	if caught < 15 {
		t.Fatalf("an owner admitting N+1 was caught in %d of 20 histories", caught)
	}
}

func TestCheckPermits_leakingOwnerFails(t *testing.T) {
	for seed := range uint64(10) {
		m := &ownerModel{n: 5, ttl: 2 * sec, leak: true}
		r := Check(simulate(m, seed, 20*sec, 0.2, 0), DefaultConfig())
		if r.OK() || r.Limits[0].Permits.Starved == 0 {
			t.Fatalf("seed %d: an owner that never expires crashed permits passed: %+v", seed, *r.Limits[0].Permits)
		}
	}
}

func TestCheckPermits_faultTerms(t *testing.T) {
	spec := concurrency("conc", 1, 10*time.Second)
	h := newHistory(spec)
	// Two permits surely held at once on a bound of 1, while a split
	// fault (owners 2) lasts: allowed; the same outside it: a violation.
	add := func(id, inv int64) {
		h.Ops = append(h.Ops, history.Op{ID: id, Node: "n1", Invoke: t0 + inv, Complete: t0 + inv + ms, Cost: 1,
			Outcome: history.Allowed, Limits: []history.LimitKey{{Name: "conc", Key: "k"}},
			Permit: &history.PermitLife{Granted: true, ReleaseInvoke: t0 + inv + 500*ms, ReleaseComplete: t0 + inv + 501*ms, Released: true}})
	}
	h.Events = []history.Event{{Time: t0 + sec, Kind: history.FaultStart, ID: 1, Fault: "split", Owners: 2},
		{Time: t0 + 3*sec, Kind: history.FaultEnd, ID: 1}}
	add(1, 2*sec)
	add(2, 2*sec+100*ms)
	if r := Check(h, DefaultConfig()); !r.OK() {
		t.Fatalf("two owners' permits during a split failed: %v", r.Violations)
	}
	add(3, 20*sec)
	add(4, 20*sec+100*ms)
	r := Check(h, DefaultConfig())
	if r.OK() || r.Limits[0].Permits.Overheld != 1 {
		t.Fatalf("two permits on a bound of 1 outside faults passed: %+v %v", *r.Limits[0].Permits, r.Violations)
	}
}

func TestCheckPermits_unansweredAcquireMayHold(t *testing.T) {
	spec := concurrency("conc", 1, time.Second)
	h := newHistory(spec)
	lk := []history.LimitKey{{Name: "conc", Key: "k"}}
	// A timed-out acquire may hold the one slot until its TTL: a denial
	// then is not starvation; a denial after it is.
	h.Ops = append(h.Ops,
		history.Op{ID: 1, Node: "n1", Invoke: t0, Complete: t0 + 250*ms, Cost: 1, Outcome: history.Timeout, Limits: lk, Permit: &history.PermitLife{}},
		history.Op{ID: 2, Node: "n1", Invoke: t0 + 800*ms, Complete: t0 + 801*ms, Cost: 1, Outcome: history.Denied,
			Limits: []history.LimitKey{{Name: "conc", Key: "k", Denied: true}}, Permit: &history.PermitLife{}})
	if r := Check(h, DefaultConfig()); r.Limits[0].Permits.Starved != 0 {
		t.Fatalf("a denial while a timed-out acquire may hold the slot counted as starved: %v", r.Violations)
	}
	h.Ops = append(h.Ops, history.Op{ID: 3, Node: "n1", Invoke: t0 + 3*sec, Complete: t0 + 3*sec + ms, Cost: 1, Outcome: history.Denied,
		Limits: []history.LimitKey{{Name: "conc", Key: "k", Denied: true}}, Permit: &history.PermitLife{}})
	if r := Check(h, DefaultConfig()); r.Limits[0].Permits.Starved != 1 {
		t.Fatalf("a denial with every slot free is not starved: %+v", *r.Limits[0].Permits)
	}
}

// A call a failure policy answered (a forward that timed out at the node
// asked) may still have been committed at the owner: a normal denial
// while it may hold the slot is not starvation.
func TestCheckPermits_fallbackAnswerMayHold(t *testing.T) {
	h := newHistory(concurrency("conc", 1, time.Second))
	h.Ops = append(h.Ops,
		history.Op{ID: 1, Node: "n1", Invoke: t0, Complete: t0 + 200*ms, Cost: 1, Outcome: history.Denied,
			FallbackMode: "closed", FallbackReason: "owner_unreachable", Limits: []history.LimitKey{{Name: "conc", Key: "k"}}, Permit: &history.PermitLife{}},
		history.Op{ID: 2, Node: "n1", Invoke: t0 + 800*ms, Complete: t0 + 801*ms, Cost: 1, Outcome: history.Denied,
			Limits: []history.LimitKey{{Name: "conc", Key: "k", Denied: true}}, Permit: &history.PermitLife{}})
	if r := Check(h, DefaultConfig()); r.Limits[0].Permits.Starved != 0 {
		t.Fatalf("a denial while a fallback-answered acquire may hold the slot counted as starved: %v", r.Violations)
	}
}

package lease

import (
	"testing"

	"github.com/weirhq/weir/gcra"
)

// world is one owner (ledger plus TAT of key "k") and one peer, driven by
// hand with explicit timestamps, recording what is admitted.
type world struct {
	t        *testing.T
	g        *Grantor
	h        *Holder
	tat      int64
	admitted []admission
}

func newWorld(t *testing.T) *world {
	return &world{t: t, g: newTestGrantor(t), h: newTestHolder(t)}
}

// refresh sends the peer's refresh at sent, serves it at served and applies
// the reply at served as well.
func (w *world) refresh(sent, served int64) {
	w.t.Helper()
	r, ok := w.h.Refresh("o", sent)
	if !ok {
		w.t.Fatal("nothing to refresh")
	}
	rep := Reply{Owner: "o", Seq: r.Seq}
	for _, it := range r.Items {
		a, err := w.g.Grant(w.tat, served, it)
		if err != nil {
			w.t.Fatal(err)
		}
		w.tat = a.TAT
		rep.Answers = append(rep.Answers, a)
	}
	if ok, err := w.h.Apply(rep, served); !ok || err != nil {
		w.t.Fatalf("apply: %v %v", ok, err)
	}
}

// spend spends n single units at the peer at now and returns how many were
// admitted from its lease.
func (w *world) spend(n int, now int64) int {
	got := 0
	for range n {
		v, err := w.h.Spend([]Ref{ref("k")}, 1, now)
		if err != nil {
			w.t.Fatal(err)
		}
		if v.Outcome == Spent {
			got++
			w.admitted = append(w.admitted, admission{now, 1})
		}
	}
	return got
}

// direct decides n single units at the owner at now.
func (w *world) direct(n int, now int64) int {
	got := 0
	for range n {
		r, err := gcra.Decide(w.g.Effective("g", "k", w.tat, now), now, lim20, 1)
		if err != nil {
			w.t.Fatal(err)
		}
		if r.Allowed {
			w.tat = r.TAT
			got++
			w.admitted = append(w.admitted, admission{now, 1})
		}
	}
	return got
}

func (w *world) check() {
	w.t.Helper()
	if err := checkWindow(lim20, w.admitted); err != nil {
		w.t.Fatal(err)
	}
}

func TestScenario_partitionedPeerSpendsAtTheLastMicrosecond(t *testing.T) {
	w := newWorld(t)
	w.spend(200, t0) // demand: the peer wants the full 8
	w.refresh(t0, t0)
	// Cut off, the peer spends nothing until the last microsecond of its
	// lease, then all of it. The owner, idle meanwhile, then sees a burst.
	end := t0 + terms.ttlNanos()
	if got := w.spend(8, end-1); got != 8 {
		t.Fatalf("spent %d of 8 before expiry", got)
	}
	if got := w.spend(1, end); got != 0 {
		t.Fatal("spent after expiry")
	}
	if got := w.direct(30, end); got != 12 {
		t.Fatalf("owner admitted %d right after expiry, want the 12 the spent 8 leave of 20", got)
	}
	w.check()
}

func TestScenario_ownerChangeMidLease(t *testing.T) {
	w := newWorld(t)
	w.spend(200, t0)
	w.refresh(t0, t0)
	w.spend(2, t0+10_000*us)
	// The key moves at t0+20ms: the old owner persists the effective TAT
	// and the reservation; the new owner loads and adopts them.
	at := t0 + 20_000*us
	res := w.g.Reservation("g", "k", at)
	w.tat = w.g.Effective("g", "k", w.tat, at)
	ng, err := NewGrantor(GrantorConfig{Name: "o2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ng.Adopt("g", "k", lim20.Interval, res, at); err != nil {
		t.Fatal(err)
	}
	w.g = ng
	// The peer spends the old owner's units to the end of their lease while
	// the new owner serves a burst; both stay within the bound.
	w.direct(30, at)
	w.spend(6, t0+99_999*us)
	w.direct(30, t0+100_000*us)
	w.direct(30, t0+150_000*us)
	w.check()
	// Its refresh returns the old units to the new owner: nothing credited.
	r, _ := w.h.Refresh("o", t0+150_000*us)
	a, err := ng.Grant(w.tat, t0+150_000*us, r.Items[0])
	if err != nil || a.Credited != 0 {
		t.Fatalf("new owner credited another ledger's lease: %+v %v", a, err)
	}
}

func TestScenario_returnAfterLateSpends(t *testing.T) {
	w := newWorld(t)
	w.spend(200, t0)
	w.refresh(t0, t0)
	// Idle until 50ms, the peer spends 3 of its 8 and returns the other 5
	// in the same instant; the owner then serves a burst. The 3 count as
	// admitted at 50ms, so the owner may admit 17, not 20.
	now := t0 + 50_000*us
	w.spend(3, now)
	w.refresh(now, now)
	if got := w.direct(30, now); got != 17-int(w.h.Units("k", now)) {
		t.Fatalf("owner admitted %d beside a new lease of %d", got, w.h.Units("k", now))
	}
	w.spend(30, now)
	w.check()
}

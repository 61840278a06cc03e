package gcra

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// ms is one millisecond in gcra's nanoseconds.
const ms = 1000 * us

func TestSettle_refundTable(t *testing.T) {
	// The seed's limit, 5/s burst 3: T = 200ms, B·T = 600ms.
	l := seedLimit
	reserve3 := Reservation{At: 0, Start: 0, Cost: 3}
	tests := []struct {
		name              string
		tat, now          int64
		r                 Reservation
		actual            int64
		wantTAT, refunded int64
	}{
		{"at once, actual 1", 600 * ms, 0, reserve3, 1, 200 * ms, 2},
		{"at once, actual 0", 600 * ms, 0, reserve3, 0, 0, 3},
		{"actual = reserved changes nothing", 600 * ms, 0, reserve3, 3, 600 * ms, 0},
		// 400ms of the reservation's 600ms lie after now at 200ms: two units.
		{"1us before 200ms", 600 * ms, 200*ms - us, reserve3, 0, 200 * ms, 2},
		{"at 200ms", 600 * ms, 200 * ms, reserve3, 0, 200 * ms, 2},
		{"1us after 200ms", 600 * ms, 200*ms + us, reserve3, 0, 400 * ms, 1},
		{"rested: the units came back with time", 600 * ms, 600 * ms, reserve3, 0, 600 * ms, 0},
		// Reserve 2 at 0 (TAT 400ms), decide 1 at 0 (TAT 600ms): the later
		// decision moves back into the refunded room, exactly as if 0 had
		// been reserved.
		{"later decision moves back", 600 * ms, 0, Reservation{Cost: 2}, 0, 200 * ms, 2},
		// B=3, reserve 2 at 0 (TAT 400ms); at 300ms decide 1 (TAT 600ms),
		// then settle 0 at 300ms: only the 100ms of the reservation after
		// now may be given back, and that is no whole unit. A full refund
		// (TAT 200ms) would admit 3 more at 300ms, 4 in an instant.
		{"later decision keeps its place", 600 * ms, 300 * ms, Reservation{Cost: 2}, 0, 600 * ms, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Settle(tc.tat, 0, tc.now, l, tc.r, tc.actual)
			if err != nil || got.TAT != tc.wantTAT || got.Refunded != tc.refunded ||
				got.Kept != max(tc.r.Cost-tc.actual, 0)-tc.refunded || got.Shift != tc.refunded*l.Interval {
				t.Fatalf("got %+v, %v; want TAT %dms, %d refunded", got, err, tc.wantTAT/ms, tc.refunded)
			}
		})
	}
}

// The shift counter: a reservation moved back by an earlier one's refund
// is bounded from where it sits now, not from where it was made.
func TestSettle_afterAnotherRefund(t *testing.T) {
	l := Limit{Interval: ms, Burst: 10}
	_, a, _ := Reserve(0, 0, 0, l, 5)      // [0, 5ms)
	res, b, _ := Reserve(5*ms, 0, 0, l, 5) // [5ms, 10ms), TAT 10ms
	sa, _ := Settle(res.TAT, 0, 0, l, a, 0)
	if sa.TAT != 5*ms || sa.Shift != 5*ms || sa.Refunded != 5 {
		t.Fatalf("first settle: %+v", sa)
	}
	d, _ := Decide(sa.TAT, 3*ms, l, 7) // [5ms, 12ms)
	// b now sits at [0, 5ms): 2ms of it after now, so 2 units back.
	sb, _ := Settle(d.TAT, sa.Shift, 3*ms, l, b, 0)
	if sb.TAT != 10*ms || sb.Refunded != 2 {
		t.Fatalf("second settle: %+v", sb)
	}
	// Bounded from where b was made (10ms), 5 units would come back,
	// TAT 7ms, and 6 more would pass at 3ms: 13 in an instant, burst 10.
	stale := settle(d.TAT, sa.Shift, 3*ms, l, b, 0, b.Start+b.Cost*l.Interval)
	if more, _ := Decide(stale.TAT, 3*ms, l, 6); !more.Allowed {
		t.Fatalf("the stale bound should over-refund here: %+v", stale)
	}
}

func TestSettle_excessAndDebtCap(t *testing.T) {
	l := seedLimit
	r := Reservation{Cost: 1}
	got, err := Settle(200*ms, 0, 0, l, r, 4)
	if err != nil || got.TAT != 800*ms || got.Extra != 3 || got.Forgiven != 0 {
		t.Fatalf("excess 3: %+v, %v", got, err)
	}
	if d, _ := Decide(got.TAT, 0, l, 1); d.Allowed || d.RetryAfter != 400*ms {
		t.Fatalf("after the excess: %+v", d)
	}
	// At most one burst of debt: TAT <= now + 2·B·T = 1200ms.
	got, _ = Settle(200*ms, 0, 0, l, r, 100)
	if got.TAT != 1200*ms || got.Extra != 5 || got.Forgiven != 94 {
		t.Fatalf("capped: %+v", got)
	}
	if d, _ := Decide(got.TAT, 0, l, 1); d.RetryAfter != l.Span()+l.Interval {
		t.Fatalf("longest wait after a settlement: %+v", d)
	}
	got, _ = Settle(1200*ms, 0, 0, l, r, 2)
	if got.TAT != 1200*ms || got.Extra != 0 || got.Forgiven != 1 {
		t.Fatalf("already at the cap: %+v", got)
	}
	// A rested key is charged from now.
	got, _ = Settle(0, 0, 10*ms, l, r, 2)
	if got.TAT != 210*ms || got.Extra != 1 {
		t.Fatalf("rested: %+v", got)
	}
	// The largest span still cannot overflow.
	big := Limit{Interval: 1 << 31, Burst: 1 << 31}
	got, _ = Settle(MaxTime+big.Span(), 0, MaxTime, big, Reservation{Cost: 1}, 1<<40)
	if got.TAT < MaxTime || got.Extra != 0 {
		t.Fatalf("largest span: %+v", got)
	}
}

func TestSettle_badInputChangesNothing(t *testing.T) {
	l := seedLimit
	for i, tc := range []struct {
		l      Limit
		r      Reservation
		actual int64
		want   error
	}{
		{l, Reservation{Cost: 1}, -1, ErrInvalidSettle},
		{l, Reservation{}, 1, ErrInvalidSettle},
		{l, Reservation{At: 5, Start: 4, Cost: 1}, 0, ErrInvalidSettle},
		{l, Reservation{At: -1, Start: 0, Cost: 1}, 0, ErrInvalidSettle},
		{l, Reservation{Cost: MaxSpan}, 0, ErrInvalidSettle},
		{Limit{}, Reservation{Cost: 1}, 0, ErrInvalidLimit},
	} {
		if got, err := Settle(600*ms, 7, 0, tc.l, tc.r, tc.actual); !errors.Is(err, tc.want) || got != (Settlement{}) {
			t.Errorf("case %d: %+v, %v", i, got, err)
		}
	}
}

// history is one random run of decisions, reservations and settlements;
// events holds every admitted decision at its net cost (reserved minus
// refunded), in admission order.
type history struct {
	l      Limit
	events []event
	refund int64
}

// runHistory drives a key with settlements bounded by bound (the real one
// is Reservation.endBound) and returns the history, or an error when the
// net history stops being one GCRA admits: replayed greedily, each
// decision's units must end by its time + B·T, and by the key's TAT.
func runHistory(r *rand.Rand, bound func(Reservation, int64, Limit) int64) (history, error) {
	h := history{l: randomLimit(r)}
	l := h.l
	type open struct {
		Reservation
		event int
	}
	var pending []open
	var tat, shift, now int64
	for step := range 400 {
		now += r.Int64N(2 * l.Interval)
		switch op := r.IntN(3); {
		case op == 0 || (op == 2 && len(pending) == 0):
			cost := 1 + r.Int64N(l.Burst)
			res, rv, err := Reserve(tat, shift, now, l, cost)
			if err != nil {
				return h, err
			}
			if res.Allowed {
				pending = append(pending, open{rv, len(h.events)})
				h.events = append(h.events, event{now, cost})
			}
			tat = res.TAT
		case op == 1:
			cost := 1 + r.Int64N(l.Burst)
			res, _ := Decide(tat, now, l, cost)
			if res.Allowed {
				h.events = append(h.events, event{now, cost})
			}
			tat = res.TAT
		default:
			i := r.IntN(len(pending))
			p := pending[i]
			pending = append(pending[:i], pending[i+1:]...)
			actual := r.Int64N(p.Cost + 2)
			s := settle(tat, shift, now, l, p.Reservation, actual, bound(p.Reservation, shift, l))
			tat, shift = s.TAT, s.Shift
			h.events[p.event].cost -= s.Refunded
			h.refund += s.Refunded
		}
		var replay int64
		for _, e := range h.events {
			replay = max(replay, e.at) + e.cost*l.Interval
			if replay > e.at+l.Span() {
				return h, fmt.Errorf("step %d: net history over the bound at %d (%+v)", step, e.at, l)
			}
		}
		if replay > tat {
			return h, fmt.Errorf("step %d: net history needs TAT %d, key holds %d", step, replay, tat)
		}
	}
	return h, nil
}

func realBound(r Reservation, shift int64, l Limit) int64 { return r.endBound(shift, l) }

func TestSettle_netHistoryWithinWindowBound(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 2))
	var refunded int64
	for round := range 300 {
		h, err := runHistory(r, realBound)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		checkWindows(t, h.l, h.events)
		refunded += h.refund
	}
	if refunded == 0 {
		t.Fatal("no history refunded anything: the test proves nothing")
	}
}

// Without the floor (a refund bounded only by now), or with the bound
// taken from where a reservation was made instead of where it sits, the
// same histories break the bound: the floor is what keeps it.
func TestSettle_netHistoryBreaksWithoutTheFloor(t *testing.T) {
	for name, bound := range map[string]func(Reservation, int64, Limit) int64{
		"no floor":    func(Reservation, int64, Limit) int64 { return MaxTime },
		"stale bound": func(r Reservation, _ int64, l Limit) int64 { return r.Start + r.Cost*l.Interval },
	} {
		r := rand.New(rand.NewPCG(26, 2))
		broke := 0
		for range 300 {
			if _, err := runHistory(r, bound); err != nil {
				broke++
			}
		}
		if broke == 0 {
			t.Errorf("%s: every history kept the bound", name)
		}
		t.Logf("%s: %d of 300 histories broke the bound", name, broke)
	}
}

func FuzzSettle(f *testing.F) {
	f.Add(int64(600*ms), int64(0), int64(0), int64(200*ms), int64(3), int64(0), int64(0), int64(3), int64(1))
	f.Add(int64(1<<62), int64(-1), int64(1<<62), int64(1), int64(1<<61), int64(5), int64(1<<61), int64(1<<60), int64(1<<62))
	f.Fuzz(func(t *testing.T, tat, shift, now, interval, burst, at, start, cost, actual int64) {
		l := Limit{Interval: interval, Burst: burst}
		r := Reservation{At: at, Start: start, Cost: cost, Shift: shift ^ at}
		s, err := Settle(tat, shift, now, l, r, actual)
		if err != nil {
			if s != (Settlement{}) {
				t.Fatalf("error %v with a settlement %+v", err, s)
			}
			return
		}
		now = min(max(now, 0), MaxTime)
		if actual <= cost {
			if s.TAT > tat || (s.TAT < tat && s.TAT < now) || s.Refunded+s.Kept != cost-actual || s.Refunded < 0 || s.Kept < 0 {
				t.Fatalf("refund from %d at %d: %+v", tat, now, s)
			}
			return
		}
		if s.TAT < tat || (s.Extra > 0 && s.TAT-now > 2*l.Span() && s.TAT-now > MaxSpan) || s.Extra+s.Forgiven != actual-cost || s.Extra < 0 || s.Forgiven < 0 {
			t.Fatalf("excess from %d at %d: %+v", tat, now, s)
		}
	})
}

package owner

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/metrictest"
	"github.com/weirhq/weir/reservation"
	"github.com/weirhq/weir/ticket"
)

// Reservations over redistest's twin and the manual clock: reserve,
// settle, sweep, and random histories against a naive model.

const ms = int64(time.Millisecond)

var (
	rateLimit = gcra.Limit{Interval: 10 * ms, Burst: 5} // B·T = 50ms
	rateKey   = "weir:{t1}:rate:t1"
	rateDef   = &decide.Def{Name: "rate", ReserveTTL: int64(time.Second)}
)

// rateRequest is a decision of cost on rateKey at the clock's now.
func (f *twinOwner) rateRequest(cost int64) *decide.Request {
	return &decide.Request{Group: "t1", Keys: []string{rateKey}, Limits: []gcra.Limit{rateLimit},
		Defs: []*decide.Def{rateDef}, Cost: cost, Now: f.now()}
}

// reserve decides r as a reservation, as the owner's dispatch does after
// its ownership check, and returns the reservation's id (zero when none).
func (f *twinOwner) reserve(t *testing.T, r *decide.Request) (gcra.Result, reservation.ID, error) {
	t.Helper()
	r.Reserve = true
	if r.Grant == nil {
		r.Grant = &decide.Grant{}
	}
	agg, err := f.o.decideReserve(t.Context(), f.mem.Epoch(), r, make([]gcra.Result, len(r.Keys)))
	if err != nil || !agg.Allowed {
		if r.Grant.Reservation != nil {
			t.Fatalf("a refused reservation got a token: %+v, %v", agg, err)
		}
		return agg, reservation.ID{}, err
	}
	tk, err := ticket.Decode(r.Grant.Reservation)
	if err != nil || tk.Kind != ticket.Reservation || tk.Group != r.Group || !slices.Equal(tk.Keys, r.Keys) {
		t.Fatalf("token %+v, %v", tk, err)
	}
	return agg, reservation.ID(tk.ID), nil
}

// settle settles id over like's keys at the clock's now.
func (f *twinOwner) settle(like *decide.Request, id reservation.ID, actual int64) (decide.Grant, error) {
	r := &decide.Request{Group: like.Group, Keys: like.Keys, Limits: like.Limits, Defs: like.Defs, Now: f.now(),
		Op: &decide.Op{Kind: decide.OpSettle, ID: id, Actual: actual}, Grant: &decide.Grant{}}
	err := f.o.settleOp(context.Background(), f.mem.Epoch(), r)
	return *r.Grant, err
}

func TestOwner_Settle_table(t *testing.T) {
	type step struct {
		name    string
		advance time.Duration
		actual  int64
		want    gcra.Settlement // TAT: relative to the reservation's now
		// then decide cost at the settlement's now: admitted, or the wait
		cost       int64
		retryAfter time.Duration
	}
	tests := []step{
		// Reserve 3 at 0 (TAT 30ms): settle 1 at once refunds 2 (TAT
		// 10ms), so 4 more pass at 0.
		{"refund right after reserve", 0, 1, gcra.Settlement{TAT: 10 * ms, Refunded: 2}, 4, 0},
		{"actual equal changes nothing", 0, 3, gcra.Settlement{TAT: 30 * ms}, 2, 0},
		// 10ms later 20ms of the reservation lie ahead: 2 units back.
		{"refund 10ms in", 10 * time.Millisecond, 0, gcra.Settlement{TAT: 10 * ms, Refunded: 2, Kept: 1}, 5, 0},
		{"1ns later only one unit", 10*time.Millisecond + 1, 0, gcra.Settlement{TAT: 20 * ms, Refunded: 1, Kept: 2}, 5, 10*time.Millisecond - 1},
		{"refund after the key rested: none", 30 * time.Millisecond, 0, gcra.Settlement{TAT: 30 * ms, Kept: 3}, 5, 0},
		// Excess 2 at 0: TAT 50ms, a burst spent; cost 1 waits 10ms.
		{"excess charged, the next request waits exactly", 0, 5, gcra.Settlement{TAT: 50 * ms, Extra: 2}, 1, 10 * time.Millisecond},
		// The debt cap: at most 2·B·T = 100ms ahead of now.
		{"excess beyond the debt cap is forgiven", 0, 100, gcra.Settlement{TAT: 100 * ms, Extra: 7, Forgiven: 90}, 1, 60 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newTwinOwner(t)
			start := f.now()
			r := f.rateRequest(3)
			if agg, id, err := f.reserve(t, r); err != nil || !agg.Allowed || f.mem.Get("t1", rateKey) != start+30*ms {
				t.Fatalf("reserve: %+v, %v", agg, err)
			} else {
				f.clk.Advance(tc.advance)
				g, err := f.settle(r, id, tc.actual)
				want := tc.want
				want.TAT, want.Shift = 0, 0
				if err != nil || !g.Done || g.Settlement != want {
					t.Fatalf("settle: %+v, %v; want %+v", g, err, want)
				}
			}
			if got := f.mem.Get("t1", rateKey) - start; got != tc.want.TAT {
				t.Fatalf("TAT %v after the reservation, want %v", time.Duration(got), time.Duration(tc.want.TAT))
			}
			next := f.rateRequest(tc.cost)
			agg, err := f.decide(t, next)
			if err != nil || agg.Allowed != (tc.retryAfter == 0) || agg.RetryAfter != int64(tc.retryAfter) {
				t.Fatalf("then cost %d: %+v, %v; want wait %v", tc.cost, agg, err, tc.retryAfter)
			}
			if tc.retryAfter > 1 {
				f.clk.Advance(tc.retryAfter - 1)
				if agg, _ := f.decide(t, f.rateRequest(tc.cost)); agg.Allowed {
					t.Fatal("admitted 1ns before the wait")
				}
				f.clk.Advance(1)
				if agg, _ := f.decide(t, f.rateRequest(tc.cost)); !agg.Allowed {
					t.Fatalf("denied after the wait: %+v", agg)
				}
			}
		})
	}
}

// A second settle, an unknown id, one named with other keys and one past
// its window all answer Done=false and change nothing.
func TestOwner_Settle_notOpen(t *testing.T) {
	f := newTwinOwner(t)
	r := f.rateRequest(3)
	_, id, err := f.reserve(t, r)
	if err != nil {
		t.Fatal(err)
	}
	other := f.rateRequest(1)
	other.Keys = []string{"weir:{t1}:rate:other"}
	for name, try := range map[string]func() (decide.Grant, error){
		"unknown id":     func() (decide.Grant, error) { return f.settle(r, reservation.ID{1}, 0) },
		"other keys":     func() (decide.Grant, error) { return f.settle(other, id, 0) },
		"negative":       func() (decide.Grant, error) { return f.settle(r, id, -1) },
		"beyond MaxSpan": func() (decide.Grant, error) { return f.settle(r, id, gcra.MaxSpan/rateLimit.Interval+1) },
	} {
		tat := f.mem.Get("t1", rateKey)
		g, err := try()
		if g.Done || f.mem.Get("t1", rateKey) != tat {
			t.Fatalf("%s: %+v, %v; TAT moved", name, g, err)
		}
		if bad := name == "negative" || name == "beyond MaxSpan"; bad != errors.Is(err, gcra.ErrInvalidSettle) {
			t.Fatalf("%s: error %v", name, err)
		}
	}
	if g, err := f.settle(r, id, 0); err != nil || !g.Done || g.Settlement.Refunded != 3 {
		t.Fatalf("settle: %+v, %v", g, err)
	}
	if g, err := f.settle(r, id, 0); err != nil || g.Done {
		t.Fatalf("second settle: %+v, %v", g, err)
	}
	// Past its window (rateDef: 1s), swept or not.
	_, late, _ := f.reserve(t, f.rateRequest(1))
	_, swept, _ := f.reserve(t, f.rateRequest(1))
	f.clk.Advance(time.Second)
	if n := f.o.sweepReservations(f.now() - 1); n != 0 {
		t.Fatalf("swept %d 1ns before expiry", n)
	}
	if g, err := f.settle(r, late, 0); err != nil || g.Done {
		t.Fatalf("settle at expiry: %+v, %v", g, err)
	}
	if n := f.o.sweepReservations(f.now()); n != 1 {
		t.Fatalf("swept %d at expiry, want 1", n)
	}
	if g, err := f.settle(r, swept, 0); err != nil || g.Done {
		t.Fatalf("settle after the sweep: %+v, %v", g, err)
	}
	lbl := []string{"limit", "rate", "result"}
	for result, want := range map[string]float64{"reserved": 3, "settled": 1, "expired": 2, "unknown": 4} {
		if got := metrictest.Value(t, f.reg, "weir_reservations_total", append(lbl, result)...); got != want {
			t.Errorf("weir_reservations_total{result=%s} = %v, want %v", result, got, want)
		}
	}
	if got := metrictest.Value(t, f.reg, "weir_reservation_units_total", "limit", "rate", "kind", "refunded"); got != 3 {
		t.Errorf("refunded units %v, want 3", got)
	}
	if f.o.reserve.table.Len() != 0 {
		t.Fatalf("%d records left", f.o.reserve.table.Len())
	}
}

// A full table refuses before anything is charged; a denied reservation
// leaves no record and gives its room back.
func TestOwner_decideReserve_fullAndDenied(t *testing.T) {
	f := newTwinOwner(t)
	tb, err := reservation.New(reservation.Config{MaxRecords: 1}, rand.NewPCG(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	f.o.reserve.table = tb
	if _, _, err := f.reserve(t, f.rateRequest(5)); err != nil {
		t.Fatal(err)
	}
	tat := f.mem.Get("t1", rateKey)
	f.clk.Advance(50 * time.Millisecond) // rested
	if _, _, err := f.reserve(t, f.rateRequest(1)); reason(err) != ReasonReservationsFull || f.mem.Get("t1", rateKey) != tat {
		t.Fatalf("full table: %v, TAT moved %v", err, f.mem.Get("t1", rateKey) != tat)
	}
	tb.Sweep(f.now() + int64(time.Second))
	f.clk.StepBack(50 * time.Millisecond)
	if agg, id, err := f.reserve(t, f.rateRequest(1)); err != nil || agg.Allowed || id != (reservation.ID{}) || tb.Len() != 0 {
		t.Fatalf("denied reserve: %+v, %v, %d records", agg, err, tb.Len())
	}
	if !tb.Claim() {
		t.Fatal("the denied reserve kept its claim")
	}
}

// Bad requests are refused with nothing charged.
func TestOwner_decideReserve_refusesWhatItCannotRecord(t *testing.T) {
	f := newTwinOwner(t)
	conc := f.rateRequest(1)
	conc.Defs = []*decide.Def{{Name: "c", Concurrency: true}}
	strict := f.rateRequest(1)
	strict.Strict = true
	for name, r := range map[string]*decide.Request{"concurrency": conc, "strict": strict} {
		if _, _, err := f.reserve(t, r); err == nil || f.mem.Has("t1", rateKey) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := f.o.decideReserve(t.Context(), f.mem.Epoch(), f.rateRequest(1), make([]gcra.Result, 1)); err == nil {
		t.Fatal("a request without Reserve was recorded")
	}
	if f.o.reserve.table.Len() != 0 || !f.o.reserve.table.Claim() {
		t.Fatal("a refused request left a record or a claim")
	}
}

// Without a Grant there is no token, but the charge is recorded (and
// expires charged as reserved).
func TestOwner_decideReserve_withoutGrant(t *testing.T) {
	f := newTwinOwner(t)
	r := f.rateRequest(2)
	r.Reserve = true
	if agg, err := f.o.decideReserve(t.Context(), f.mem.Epoch(), r, make([]gcra.Result, 1)); err != nil || !agg.Allowed {
		t.Fatalf("%+v, %v", agg, err)
	}
	if f.o.reserve.table.Len() != 1 {
		t.Fatal("no record")
	}
}

// A key holds at most its burst of open reservations: the oldest gives
// way, charged as reserved.
func TestOwner_decideReserve_fullKeyEvictsItsOldest(t *testing.T) {
	f := newTwinOwner(t)
	first := f.rateRequest(1)
	_, oldest, _ := f.reserve(t, first)
	for range rateLimit.Burst {
		f.clk.Advance(10 * time.Millisecond)
		if agg, _, err := f.reserve(t, f.rateRequest(1)); err != nil || !agg.Allowed {
			t.Fatalf("%+v, %v", agg, err)
		}
	}
	if g, err := f.settle(first, oldest, 0); err != nil || g.Done {
		t.Fatalf("the oldest settled: %+v, %v", g, err)
	}
	if n := f.o.reserve.table.Len(); n != int(rateLimit.Burst) {
		t.Fatalf("%d open, want the burst %d", n, rateLimit.Burst)
	}
}

// A drop (hand-off, leave, thaw) loses the key's open reservations, as
// they are not persisted: a settle after it, at the old epoch or the new
// one, answers not settled and changes nothing; the reservation stays
// charged as reserved. A settle before the drop has its excess written
// behind.
func TestOwner_Settle_handoffAndWriteBehind(t *testing.T) {
	f := newTwinOwner(t)
	r := f.rateRequest(1)
	_, kept, _ := f.reserve(t, r)
	g, err := f.settle(r, kept, 4) // charges 3 more
	if err != nil || !g.Done || g.Settlement.Extra != 3 {
		t.Fatalf("settle: %+v, %v", g, err)
	}
	if err := f.wb.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	tat := f.mem.Get("t1", rateKey)
	if got, _ := f.redis.TAT(rateKey); got != tat {
		t.Fatalf("Redis holds %v, want the settled TAT %v", got, tat)
	}
	_, id, _ := f.reserve(t, r)
	epoch := f.mem.Epoch()
	f.o.Drop(t.Context(), func(string) bool { return true })
	if f.o.reserve.table.Len() != 0 {
		t.Fatalf("%d reservations survived the drop", f.o.reserve.table.Len())
	}
	sr := &decide.Request{Group: "t1", Keys: r.Keys, Limits: r.Limits, Defs: r.Defs, Now: f.now(),
		Op: &decide.Op{Kind: decide.OpSettle, ID: id, Actual: 0}, Grant: &decide.Grant{}}
	if err := f.o.settleOp(t.Context(), epoch, sr); sr.Grant.Done || (err != nil && reason(err) != "ownership_changing") {
		t.Fatalf("settle across a drop: %v, %+v", err, sr.Grant)
	}
	if g, err := f.settle(r, id, 0); err != nil || g.Done {
		t.Fatalf("settle of a dropped reservation at the new epoch: %+v, %v", g, err)
	}
}

// Concurrent reserves and settles on one key (run with -race): every
// settle of an open record is Done exactly once, and nothing is left.
func TestOwner_reserveSettle_concurrent(t *testing.T) {
	f := newTwinOwner(t)
	big := gcra.Limit{Interval: 1, Burst: 1 << 20}
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range 8 {
		wg.Go(func() {
			for range 50 {
				r := f.rateRequest(1)
				r.Limits, r.Reserve, r.Grant = []gcra.Limit{big}, true, &decide.Grant{}
				agg, err := f.o.decideReserve(context.Background(), f.mem.Epoch(), r, make([]gcra.Result, 1))
				tk, terr := ticket.Decode(r.Grant.Reservation)
				if err != nil || !agg.Allowed || terr != nil {
					t.Errorf("reserve: %+v, %v, %v", agg, err, terr)
					return
				}
				id := reservation.ID(tk.ID)
				g1, _ := f.settle(r, id, 0)
				g2, _ := f.settle(r, id, 0)
				mu.Lock()
				done += btoi(g1.Done) + btoi(g2.Done)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if done != 400 || f.o.reserve.table.Len() != 0 {
		t.Fatalf("%d settled of 400, %d open", done, f.o.reserve.table.Len())
	}
	if _, ok := f.o.reserve.table.Shift(rateKey); ok {
		t.Fatal("the key's counter outlived its records")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// effectiveLeases raises every TAT by add, as units out on leases would.
type effectiveLeases struct{ add int64 }

func (effectiveLeases) Active() bool { return true }
func (l effectiveLeases) Effective(_, _ string, tat, now int64) int64 {
	return max(tat, now) + l.add
}
func (effectiveLeases) Forget(func(string) bool) {}

// With leases out, a reservation starts where the decision saw the key:
// at its Effective TAT, not the stored one.
func TestOwner_decideReserve_readsTheLeasedTAT(t *testing.T) {
	f := newTwinOwner(t)
	f.o.EnableLeases(effectiveLeases{add: 20 * ms})
	r := f.rateRequest(1)
	_, id, err := f.reserve(t, r)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := f.o.reserve.table.Get(id)
	if got := rec.Keys[0].Res; got.Start != r.Now+20*ms || got.At != r.Now || f.mem.Get("t1", rateKey) != r.Now+30*ms {
		t.Fatalf("reservation %+v at %d, TAT %d", got, r.Now, f.mem.Get("t1", rateKey))
	}
}

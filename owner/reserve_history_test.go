package owner

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/reservation"
)

// Random histories on one key and on a two-key composite: plain decisions
// (on the composite or one of its keys), reserves, and settles below,
// at and above the reservation, twice, after expiry, or of unknown ids,
// at random increasing times, with sweeps. A naive model checks, per key:
// over every window [a, b], the admitted cost minus the units refunded to
// the decisions admitted in it is at most B + (b−a)/T; no TAT ever runs
// past now + 2·B·T (the debt cap); and Done is true exactly for a settle
// of a reservation that is open (neither settled, expired, nor evicted
// from a key holding its burst of them).
func TestOwner_ReserveSettle_randomHistories(t *testing.T) {
	for _, keys := range []int{1, 2} {
		var refunded int64
		for seed := range uint64(historySeeds) {
			refunded += runReserveHistory(t, seed, keys)
		}
		if refunded == 0 {
			t.Fatalf("%d keys: no history refunded anything: the test proves nothing", keys)
		}
		t.Logf("%d keys: %d units refunded over %d histories", keys, refunded, historySeeds)
	}
}

// historySeeds is how many random histories of each shape run.
const historySeeds = 200

// netDecision is an admitted decision: its cost on each key it charged,
// less the units refunded to it there.
type netDecision struct {
	at, cost int64
	charged  []bool
	refunded []int64
}

type modelReservation struct {
	id      reservation.ID
	unknown bool // an id never reserved
	dec     int  // in the decisions
	expiry  int64
}

type reserveHistory struct {
	t      *testing.T
	f      *twinOwner
	rnd    *rand.Rand
	keys   []string
	limits []gcra.Limit
	defs   []*decide.Def
	ttl    int64
	decs   []netDecision
	made   []modelReservation
	open   []reservation.ID // the table's, oldest first
}

func runReserveHistory(t *testing.T, seed uint64, nkeys int) (refunded int64) {
	h := &reserveHistory{t: t, f: newTwinOwner(t), rnd: rand.New(rand.NewPCG(seed, uint64(nkeys))),
		keys: []string{"weir:{t1}:a", "weir:{t1}:b"}[:nkeys]}
	for i := range h.keys {
		l := gcra.Limit{Interval: []int64{ms, 3 * ms, 10 * ms}[h.rnd.IntN(3)], Burst: 1 + h.rnd.Int64N(20)}
		ttl := (1 + h.rnd.Int64N(4)) * l.Span()
		h.limits = append(h.limits, l)
		h.defs = append(h.defs, &decide.Def{Name: h.keys[i], ReserveTTL: ttl})
		h.ttl = min(ttl, cmpZero(h.ttl))
	}
	for step := range 400 {
		h.f.clk.Advance(time.Duration(h.rnd.Int64N(2 * h.limits[0].Interval)))
		switch op := h.rnd.IntN(10); {
		case op < 3:
			h.decide()
		case op < 6:
			h.reserve()
		case op < 8 && len(h.open) > 0: // mostly open ones
			id := h.open[h.rnd.IntN(len(h.open))]
			h.settle(h.made[slices.IndexFunc(h.made, func(m modelReservation) bool { return m.id == id })])
		case op < 9 && len(h.made) > 0: // settled, expired or evicted too
			h.settle(h.made[h.rnd.IntN(len(h.made))])
		case op == 9 && h.rnd.IntN(2) == 0:
			h.settle(modelReservation{id: reservation.ID{byte(step), 7}, unknown: true})
		default:
			h.sweep()
		}
		now := h.f.now()
		for i, k := range h.keys {
			if tat := h.f.mem.Get("t1", k); tat > now+2*h.limits[i].Span() {
				t.Fatalf("seed %d step %d: key %d TAT %v ahead, past the debt cap", seed, step, i, time.Duration(tat-now))
			}
		}
	}
	h.checkWindows(seed)
	for _, d := range h.decs {
		refunded += d.refunded[0]
	}
	return refunded
}

func cmpZero(v int64) int64 {
	if v == 0 {
		return 1 << 62
	}
	return v
}

func (h *reserveHistory) request(keys []int, cost int64) *decide.Request {
	r := &decide.Request{Group: "t1", Cost: cost, Now: h.f.now()}
	for _, i := range keys {
		r.Keys, r.Limits, r.Defs = append(r.Keys, h.keys[i]), append(r.Limits, h.limits[i]), append(r.Defs, h.defs[i])
	}
	return r
}

func (h *reserveHistory) all() []int {
	out := make([]int, len(h.keys))
	for i := range out {
		out[i] = i
	}
	return out
}

func (h *reserveHistory) cost() int64 {
	b := h.limits[0].Burst
	for _, l := range h.limits {
		b = min(b, l.Burst)
	}
	return 1 + h.rnd.Int64N(b)
}

func (h *reserveHistory) admitted(keys []int, cost int64) int {
	d := netDecision{at: h.f.now(), cost: cost, charged: make([]bool, len(h.keys)), refunded: make([]int64, len(h.keys))}
	for _, i := range keys {
		d.charged[i] = true
	}
	h.decs = append(h.decs, d)
	return len(h.decs) - 1
}

func (h *reserveHistory) decide() {
	keys := h.all()
	if len(keys) > 1 && h.rnd.IntN(2) == 0 {
		keys = []int{h.rnd.IntN(len(keys))}
	}
	r := h.request(keys, h.cost())
	agg, err := h.f.decide(h.t, r)
	if err != nil {
		h.t.Fatal(err)
	}
	if agg.Allowed {
		h.admitted(keys, r.Cost)
	}
}

func (h *reserveHistory) reserve() {
	r := h.request(h.all(), h.cost())
	agg, id, err := h.f.reserve(h.t, r)
	if err != nil {
		h.t.Fatal(err)
	}
	if !agg.Allowed {
		return
	}
	capacity := int(h.limits[0].Burst)
	for _, l := range h.limits {
		capacity = min(capacity, int(l.Burst))
	}
	for len(h.open) >= capacity {
		h.open = h.open[1:] // evicted, charged as reserved
	}
	// The record holds where the decision put each key's units.
	rec, ok := h.f.o.reserve.table.Get(id)
	if !ok {
		h.t.Fatal("admitted reservation not recorded")
	}
	for j, k := range rec.Keys {
		shift, _ := h.f.o.reserve.table.Shift(k.Key)
		if want := h.f.mem.Get("t1", k.Key) - r.Cost*h.limits[j].Interval; k.Res.Start != want || k.Res.At != r.Now ||
			k.Res.Cost != r.Cost || k.Res.Shift != shift || k.Limit != h.limits[j] || k.Name != h.keys[j] {
			h.t.Fatalf("key %d: recorded %+v, want start %d, shift %d", j, k, want, shift)
		}
	}
	h.open = append(h.open, id)
	h.made = append(h.made, modelReservation{id: id, dec: h.admitted(h.all(), r.Cost), expiry: r.Now + h.ttl})
}

func (h *reserveHistory) settle(m modelReservation) {
	now := h.f.now()
	cost := int64(0)
	if !m.unknown {
		cost = h.decs[m.dec].cost
	}
	actual := cost
	switch h.rnd.IntN(3) {
	case 0, 1:
		actual = h.rnd.Int64N(cost + 1)
	case 2:
		actual = cost + 1 + h.rnd.Int64N(10)
	}
	before := h.refundedUnits()
	g, err := h.f.settle(h.request(h.all(), 0), m.id, actual)
	if err != nil {
		h.t.Fatal(err)
	}
	i := slices.Index(h.open, m.id)
	if i >= 0 {
		h.open = slices.Delete(h.open, i, i+1)
	}
	if want := i >= 0 && m.expiry > now; g.Done != want {
		h.t.Fatalf("settle of %x: Done %v, want %v", m.id[:2], g.Done, want)
	}
	after := h.refundedUnits()
	fewest := int64(-1)
	for j := range h.keys {
		got := after[j] - before[j]
		if got > max(cost-actual, 0) || (!g.Done && got != 0) {
			h.t.Fatalf("refunded %d of %d reserved, actual %d (done %v)", got, cost, actual, g.Done)
		}
		if g.Done {
			h.decs[m.dec].refunded[j] += got
		}
		if fewest < 0 || got < fewest {
			fewest = got
		}
	}
	if g.Done && g.Settlement.Refunded != fewest {
		h.t.Fatalf("settlement %+v, fewest refunded %d", g.Settlement, fewest)
	}
}

func (h *reserveHistory) refundedUnits() []int64 {
	out := make([]int64, len(h.keys))
	for j, k := range h.keys {
		out[j] = int64(testutil.ToFloat64(h.f.o.reserve.metrics.units.WithLabelValues(k, "refunded")))
	}
	return out
}

func (h *reserveHistory) sweep() {
	now := h.f.now()
	want := 0
	h.open = slices.DeleteFunc(h.open, func(id reservation.ID) bool {
		for _, m := range h.made {
			if m.id == id && m.expiry <= now {
				want++
				return true
			}
		}
		return false
	})
	if got := h.f.o.sweepReservations(now); got != want {
		h.t.Fatalf("swept %d, model %d", got, want)
	}
}

// checkWindows checks every window between two admitted decisions' times,
// and that the net history replays as one GCRA admits: each decision's
// net units, queued after the ones before it, end by its time + B·T and
// by the key's TAT.
func (h *reserveHistory) checkWindows(seed uint64) {
	for j, l := range h.limits {
		var replay int64
		for _, d := range h.decs {
			if d.charged[j] {
				replay = max(replay, d.at) + (d.cost-d.refunded[j])*l.Interval
				if replay > d.at+l.Span() {
					h.t.Fatalf("seed %d key %d: the net history does not replay within the burst at %d", seed, j, d.at)
				}
			}
		}
		if tat := h.f.mem.Get("t1", h.keys[j]); replay > tat {
			h.t.Fatalf("seed %d key %d: the net history needs TAT %d, the key holds %d", seed, j, replay, tat)
		}
		for a := range h.decs {
			net := int64(0)
			for b := a; b < len(h.decs); b++ {
				if d := h.decs[b]; d.charged[j] {
					net += d.cost - d.refunded[j]
				}
				if w := h.decs[b].at - h.decs[a].at; net*l.Interval > l.Span()+w {
					h.t.Fatalf("seed %d key %d: %d net units in %v, bound %d + W/T (T %v)", seed, j, net, time.Duration(w), l.Burst, time.Duration(l.Interval))
				}
			}
		}
	}
}

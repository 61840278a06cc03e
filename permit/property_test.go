package permit

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// naive is the deliberately simple reference a Set must match: a slice of
// (id, cost, expiry), filtered by expiry at every question, and a wait
// found by trying every expiry as the instant to come back.
type naive struct {
	latest int64
	ps     []Permit
}

func (m *naive) at(now int64) int64 {
	m.latest = min(max(now, 0, m.latest), MaxTime)
	return m.latest
}

// heldAt is the slots of permits still live at t.
func (m *naive) heldAt(t int64) int64 {
	var n int64
	for _, p := range m.ps {
		if p.Expiry > t {
			n += p.Cost
		}
	}
	return n
}

func (m *naive) find(now int64, id ID) int {
	return slices.IndexFunc(m.ps, func(p Permit) bool { return p.ID == id && p.Expiry > now })
}

func (m *naive) acquire(now int64, l Limit, id ID, cost int64, commit bool) Decision {
	now = m.at(now)
	held := m.heldAt(now)
	free := max(l.MaxInFlight-held, 0)
	switch {
	case cost > l.MaxInFlight:
		return Decision{TooCostly: true, InFlight: held, Remaining: free}
	case held+cost <= l.MaxInFlight:
		d := Decision{Allowed: true, InFlight: held + cost, Remaining: free - cost}
		if commit {
			m.ps = append(m.ps, Permit{ID: id, Cost: cost, Expiry: now + l.TTL})
			d.Expiry = now + l.TTL
		}
		return d
	}
	wait := int64(-1)
	for _, p := range m.ps {
		if p.Expiry > now && m.heldAt(p.Expiry)+cost <= l.MaxInFlight && (wait < 0 || p.Expiry-now < wait) {
			wait = p.Expiry - now
		}
	}
	return Decision{RetryAfter: wait, InFlight: held, Remaining: free}
}

func (m *naive) release(now int64, id ID) bool {
	now = m.at(now)
	if i := m.find(now, id); i >= 0 {
		m.ps = slices.Delete(m.ps, i, i+1)
		return true
	}
	return false
}

func (m *naive) renew(now int64, id ID, ttl int64) (int64, bool) {
	now = m.at(now)
	i := m.find(now, id)
	if i < 0 {
		return 0, false
	}
	m.ps[i].Expiry = now + ttl
	return now + ttl, true
}

func (m *naive) live(now int64) []Permit {
	now = m.at(now)
	var out []Permit
	for _, p := range m.ps {
		if p.Expiry > now {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Permit) int {
		if a.Expiry != b.Expiry {
			return int(min(max(a.Expiry-b.Expiry, -1), 1))
		}
		return slices.Compare(a.ID[:], b.ID[:])
	})
	return out
}

func seqID(n uint64) ID {
	var id ID
	binary.BigEndian.PutUint64(id[8:], n+1)
	return id
}

// TestSet_matchesNaiveModel runs random histories of acquire, check then
// commit, release, renew, encode/decode and time moving (sometimes
// backwards) against the naive model: every answer identical, and the
// slots live never above N at any instant.
func TestSet_matchesNaiveModel(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 1))
	for round := range 400 {
		l := Limit{MaxInFlight: 1 + r.Int64N(8), TTL: 1 + r.Int64N(50*us)}
		var s Set
		m := &naive{}
		now := r.Int64N(1 << 40)
		var ids uint64
		for step := range 300 {
			now += r.Int64N(l.TTL/4+2) - r.Int64N(l.TTL/40+1)
			fail := func(what string, got, want any) {
				t.Fatalf("round %d step %d (%+v, now %d) %s: set %+v, model %+v", round, step, l, now, what, got, want)
			}
			switch op := r.IntN(10); {
			case op < 4:
				cost := 1 + r.Int64N(l.MaxInFlight+1)
				got, err := s.Acquire(now, l, seqID(ids), cost)
				if want := m.acquire(now, l, seqID(ids), cost, true); err != nil || got != want {
					fail("acquire", got, want)
				}
				ids++
			case op < 5:
				got, err := s.Check(now, l, 1)
				want := m.acquire(now, l, seqID(ids), 1, false)
				if err != nil || got != want {
					fail("check", got, want)
				}
				if got.Allowed {
					c, err := s.Commit(now-r.Int64N(us), l, seqID(ids), 1) // a lagging clock reads as latest
					if cw := m.acquire(now, l, seqID(ids), 1, true); err != nil || c != cw {
						fail("commit", c, cw)
					}
				}
				ids++
			case op < 7:
				x := seqID(uint64(r.Int64N(int64(ids) + 2)))
				if got, want := s.Release(now, x), m.release(now, x); got != want {
					fail("release", got, want)
				}
			case op < 9:
				x, ttl := seqID(uint64(r.Int64N(int64(ids)+2))), 1+r.Int64N(l.TTL)
				exp, ok, err := s.Renew(now, x, ttl)
				wexp, wok := m.renew(now, x, ttl)
				if err != nil || exp != wexp || ok != wok {
					fail("renew", []any{exp, ok, err}, []any{wexp, wok})
				}
			default:
				b, _ := s.MarshalBinary()
				s = Set{}
				if err := s.UnmarshalBinary(b); err != nil {
					t.Fatalf("round %d step %d: decode own encoding: %v", round, step, err)
				}
			}
			if got, want := s.Permits(now), m.live(now); !slices.Equal(got, want) {
				fail("permits", got, want)
			}
			if held := m.heldAt(m.latest); held > l.MaxInFlight || held != s.InFlight() {
				fail("slots held", s.InFlight(), held)
			}
		}
	}
}

// TestSet_matchesNaiveModel_limitChanges: a policy reload changes N (and
// the TTL) between calls; the Set and the model still agree, and no
// permit is ever committed beyond the N of its own call.
func TestSet_matchesNaiveModel_limitChanges(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 3))
	for round := range 200 {
		var s Set
		m := &naive{}
		now := r.Int64N(1 << 40)
		for step := range 300 {
			l := Limit{MaxInFlight: 1 + r.Int64N(6), TTL: 1 + r.Int64N(40*us)}
			now += r.Int64N(10 * us)
			cost := 1 + r.Int64N(3)
			x := seqID(uint64(step))
			got, err := s.Acquire(now, l, x, cost)
			want := m.acquire(now, l, x, cost, true)
			if err != nil || got != want {
				t.Fatalf("round %d step %d (%+v, cost %d): set %+v, model %+v", round, step, l, cost, got, want)
			}
			if got.Allowed && got.InFlight > l.MaxInFlight {
				t.Fatalf("round %d step %d: %d slots held under N = %d", round, step, got.InFlight, l.MaxInFlight)
			}
			if r.IntN(3) == 0 {
				y := seqID(uint64(r.IntN(step + 1)))
				if a, b := s.Release(now, y), m.release(now, y); a != b {
					t.Fatalf("round %d step %d: release %v, model %v", round, step, a, b)
				}
			}
		}
	}
}

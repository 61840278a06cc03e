package rlqs

import (
	"testing"
	"time"
)

// TestSession_property_bound runs random Envoys (demand from 5 to 400/s,
// reporting intervals from 200ms to 3s), late deliveries, lost lease
// calls, cut streams and direct decisions at the owner, and checks that no
// window holds more than B + W/T admissions of the tenant limit.
func TestSession_property_bound(t *testing.T) {
	for seed := range uint64(8) {
		s := newSim(t, seed)
		n := 1 + s.rng.IntN(5)
		for range n {
			s.addEnvoy(5+s.rng.Float64()*395, time.Duration(200+s.rng.IntN(2800))*time.Millisecond)
		}
		s.lateArrive = true
		if seed%2 == 1 {
			s.cutEvery = int64(3 * time.Second)
		}
		if seed%3 == 0 {
			s.direct = 50
		}
		lost := seed % 4
		s.owner.Drop = func() bool { return lost > 0 && s.rng.IntN(20) == 0 }
		s.run(30 * time.Second)
		lim := s.p.Limit("tenant").Params
		if ex, from, to := worst(s.admitted, lim.Burst, lim.Interval); ex > 0 {
			t.Fatalf("seed %d: %d envoys: window [%s, %s] admitted %.0f over B + W/T", seed, n,
				time.Duration(from), time.Duration(to), ex)
		}
		t.Logf("seed %d: %d envoys, %d requests, %d admitted, %d stream messages", seed, n, s.requests, len(s.admitted), s.messages)
	}
}

// TestSession_steady_efficiency: three Envoys whose demand (450/s) exceeds
// the limit (200/s) admit at least 0.9 of the limit's rate once the burst
// is spent, with a stream message per hundreds of requests.
func TestSession_steady_efficiency(t *testing.T) {
	s := newSim(t, 42)
	s.addEnvoy(300, time.Second)
	s.addEnvoy(100, time.Second)
	s.addEnvoy(50, 500*time.Millisecond)
	s.run(30 * time.Second) // spend the burst
	before, msgs, reqs := len(s.admitted), s.messages, s.requests
	st0 := s.owner.Stats()["tenant"]
	s.run(30 * time.Second)
	st1 := s.owner.Stats()["tenant"]
	t.Logf("owner: net %d units leased (granted %d, credited %d, expired %d)", (st1.GrantedUnits-st0.GrantedUnits)-(st1.CreditedUnits-st0.CreditedUnits),
		st1.GrantedUnits-st0.GrantedUnits, st1.CreditedUnits-st0.CreditedUnits, st1.ExpiredUnits-st0.ExpiredUnits)
	got := float64(len(s.admitted) - before)
	want := 30.0 * 200
	if got < 0.9*want || got > want+1000 {
		t.Fatalf("admitted %.0f in 30s of steady state, want in [%.0f, %.0f]", got, 0.9*want, want+1000)
	}
	perReq := float64(s.messages-msgs) / float64(s.requests-reqs)
	if perReq > 0.02 {
		t.Fatalf("%.4f stream messages per request, want under 0.02", perReq)
	}
	t.Logf("steady state: %.0f admitted of %.0f (%.3f), %.5f messages per request", got, want, got/want, perReq)
	lim := s.p.Limit("tenant").Params
	if ex, _, _ := worst(s.admitted, lim.Burst, lim.Interval); ex > 0 {
		t.Fatalf("bound exceeded by %.0f", ex)
	}
}

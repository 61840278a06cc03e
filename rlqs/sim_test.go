package rlqs

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/rlqs/rlqstest"
)

// testPolicy has one leasable Envoy limit, edge/tenant: 200/s, burst 3000,
// leases of up to 3000 units for 3s; one unleasable, edge/user; and one
// with a short lease, edge/ip.
const testPolicy = `limits:
  - name: tenant
    domain: edge
    match: [tenant]
    rate: 200/s
    burst: 3000
    lease: {max: 3000, ttl: 3s}
  - name: user
    domain: edge
    match: [user]
    rate: 10/s
    burst: 10
  - name: ip
    domain: edge
    match: [ip]
    rate: 100/s
    burst: 1000
    lease: {max: 100, ttl: 250ms}
`

func mustPolicy(t testing.TB, src string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testConfig() Config {
	c := DefaultConfig()
	c.NodeName = "n1"
	return c
}

// simEnvoy is one emulated Envoy and its stream's session.
type simEnvoy struct {
	f        *rlqstest.Filter
	s        *session
	rate     float64 // requests per second offered
	interval int64   // reporting interval
	next     int64   // next report
	inbox    []delivery
	streams  int
}

type delivery struct {
	at   int64
	resp *rlqsv3.RateLimitQuotaResponse
}

// sim runs envoys against one in-process owner in simulated time, 1ms a
// step, and records every admission (the Envoys' and the owner's direct
// ones) with its time.
type sim struct {
	t        testing.TB
	cfg      Config
	p        *policy.Policy
	owner    *rlqstest.Owner
	m        *metrics
	now      int64
	rng      *rand.Rand
	envoys   []*simEnvoy
	admitted []int64
	messages int // stream messages both ways
	requests int
	// faults
	cutEvery   int64   // > 0: each envoy's stream is cut about this often
	direct     float64 // direct decisions per second at the owner
	lateArrive bool    // responses take up to Delivery to arrive
}

func newSim(t testing.TB, seed uint64) *sim {
	s := &sim{t: t, cfg: testConfig(), p: mustPolicy(t, testPolicy), rng: rand.New(rand.NewPCG(seed, seed^0x9e37))}
	var err error
	if s.owner, err = rlqstest.NewOwner("owner#1", func() int64 { return s.now }); err != nil {
		t.Fatal(err)
	}
	if s.m, err = newMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	return s
}

var tenantBucket = map[string]string{"tenant": "acme"}

func (s *sim) addEnvoy(rate float64, interval time.Duration) {
	e := &simEnvoy{f: rlqstest.NewFilter(rlqstest.FilterConfig{Domain: "edge", ReportingInterval: interval}),
		rate: rate, interval: interval.Nanoseconds()}
	e.s = newSession(s.cfg, s.name(len(s.envoys), 0), s.m)
	e.next = s.now + e.interval
	s.envoys = append(s.envoys, e)
}

func (s *sim) name(i, stream int) string {
	return "n1/rlqs/test/" + string(rune('a'+i)) + string(rune('0'+stream%10))
}

// run advances the simulation by d.
func (s *sim) run(d time.Duration) {
	end := s.now + d.Nanoseconds()
	const step = int64(time.Millisecond)
	tick := s.cfg.Tick.Nanoseconds()
	for ; s.now < end; s.now += step {
		for i, e := range s.envoys {
			s.deliver(e)
			if s.cutEvery > 0 && s.rng.Int64N(s.cutEvery/step) == 0 {
				e.s.close()
				e.streams++
				e.s = newSession(s.cfg, s.name(i, e.streams), s.m)
			}
			for range s.arrivals(e.rate) {
				s.requests++
				ok, first := e.f.Request(tenantBucket, s.now)
				if ok {
					s.admitted = append(s.admitted, s.now)
				}
				if first != nil {
					s.send(e, first)
				}
			}
			if s.now >= e.next {
				e.next += e.interval
				s.send(e, e.f.Report(s.now))
			}
			if s.now%tick == 0 {
				s.reply(e, e.s.tick(s.p, s.now))
			}
		}
		for range s.arrivals(s.direct) {
			if s.owner.Decide("acme", tenantKey(s.p), s.p.Limit("tenant").Params, s.now) {
				s.admitted = append(s.admitted, s.now)
			}
		}
	}
}

func tenantKey(p *policy.Policy) string {
	m, _ := p.ResolveEnvoy("edge", []policy.EnvoyEntry{{Key: "tenant", Value: "acme"}})
	return m.Key
}

// arrivals is how many requests at rate per second arrive in one 1ms step.
func (s *sim) arrivals(rate float64) int {
	n := 0
	for p := rate / 1000; p > 0; p-- {
		if s.rng.Float64() < p {
			n++
		}
	}
	return n
}

func (s *sim) send(e *simEnvoy, rep *rlqsv3.RateLimitQuotaUsageReports) {
	s.messages++
	acts, err := e.s.report(s.p, rep, s.now)
	if err != nil {
		s.t.Fatalf("report refused: %v", err)
	}
	s.reply(e, acts)
}

// reply runs e's due lease calls and queues the actions for delivery.
func (s *sim) reply(e *simEnvoy, acts []*rlqsv3.RateLimitQuotaResponse_BucketAction) {
	for _, c := range e.s.calls(s.now) {
		answers, err := s.owner.Lease(context.Background(), c.holder, c.refresh)
		acts = append(acts, e.s.apply(c, answers, err, s.now, s.now)...)
	}
	if len(acts) == 0 {
		return
	}
	s.messages++
	at := s.now
	if s.lateArrive {
		at += s.rng.Int64N(s.cfg.Delivery.Nanoseconds())
	}
	e.inbox = append(e.inbox, delivery{at, &rlqsv3.RateLimitQuotaResponse{BucketAction: acts}})
}

func (s *sim) deliver(e *simEnvoy) {
	for len(e.inbox) > 0 && e.inbox[0].at <= s.now {
		e.f.Apply(e.inbox[0].resp, s.now)
		e.inbox = e.inbox[1:]
	}
}

// worst returns the largest excess over burst + W/T of any window of the
// admissions (<= 0 when the bound holds), and the window.
func worst(times []int64, burst, interval int64) (excess float64, from, to int64) {
	ts := slices.Clone(times)
	slices.Sort(ts)
	best, at := -1e18, int64(0)
	excess = -1e18
	for j, t := range ts {
		// window [ts[i], t] holds j-i+1 admissions; the bound is burst +
		// (t-ts[i])/interval: track max over i of ts[i]/interval - i.
		if v := float64(ts[j])/float64(interval) - float64(j); v > best {
			best, at = v, ts[j]
		}
		if e := float64(j+1) - float64(t)/float64(interval) + best - float64(burst); e > excess {
			excess, from, to = e, at, t
		}
	}
	return excess, from, to
}

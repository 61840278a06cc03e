package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlscommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirhq/weir/rlqs/rlqstest"
)

// rlqsPolicy has one leasable Envoy limit: 200/s, burst 2000 (RLQS needs
// the burst to hold two leases per stream of rate × the 2s assignment:
// docs/envoy.md, "RLS or RLQS"), leases of up to 2000 units for 3s.
const rlqsPolicy = "version: rlqs-proc\nlimits:\n  - {name: tenant, domain: edge, match: [tenant], rate: 200/s, burst: 2000, on_failure: closed, lease: {max: 2000, ttl: 3s}}\n"

// envoyClient is one emulated Envoy sending requests for one bucket at a
// steady pace through one node.
type envoyClient struct {
	c        *rlqstest.Client
	pace     time.Duration
	requests atomic.Int64
	mu       sync.Mutex
	admitted []time.Time
}

func startEnvoy(t *testing.T, p *proc, rate int) *envoyClient {
	t.Helper()
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := rlqstest.NewClient(conn, rlqstest.FilterConfig{Domain: "edge", ReportingInterval: time.Second})
	t.Cleanup(c.Close)
	return &envoyClient{c: c, pace: time.Second / time.Duration(rate)}
}

// run sends requests until stop closes.
func (e *envoyClient) run(stop <-chan struct{}) {
	tick := time.NewTicker(e.pace) // a steady load, not a wait
	defer tick.Stop()
	id := map[string]string{"tenant": "acme"}
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		e.requests.Add(1)
		if e.c.Request(id) {
			e.mu.Lock()
			e.admitted = append(e.admitted, time.Now())
			e.mu.Unlock()
		}
	}
}

// allAdmitted returns every client's admissions, sorted.
func allAdmitted(es []*envoyClient) []time.Time {
	var out []time.Time
	for _, e := range es {
		e.mu.Lock()
		out = append(out, e.admitted...)
		e.mu.Unlock()
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// checkWindows fails t if a window [a, b] of the sorted admissions holds
// more than burst + (b-a)/interval of them.
func checkWindows(t *testing.T, adm []time.Time, burst int64, interval time.Duration) {
	t.Helper()
	if len(adm) == 0 {
		return
	}
	t0 := adm[0]
	best, from := -1e18, t0
	for j, at := range adm {
		x := float64(at.Sub(t0)) / float64(interval)
		if v := x - float64(j); v > best {
			best, from = v, at
		}
		if n := float64(j+1) - x + best; n > float64(burst)+1e-9 {
			t.Fatalf("window [%s, %s] admitted %.0f over B + W/T = %d + %s/%s",
				from.Sub(t0), at.Sub(t0), n-float64(burst), burst, at.Sub(from), interval)
		}
	}
}

func countIn(adm []time.Time, from, to time.Time) int {
	n := 0
	for _, a := range adm {
		if !a.Before(from) && a.Before(to) {
			n++
		}
	}
	return n
}

// TestRLQS_process_envoysShareLimit runs three real nodes and a
// redis-server, spends the limit's burst through RLS, and then four
// emulated Envoys (rlqstest.Client: their own token
// buckets, 1s reports) through different nodes with skewed demand (300,
// 150, 50 and 20 requests a second against a 200/s limit). Admissions stay
// within B + W/T in every window; once they settle, they reach at least
// 0.85 of the limit's rate; stream messages stay a small fraction of the
// requests (Envoys decide locally). Then one stream is cut and the key's
// owner is SIGKILLed: the bound still holds, and the survivors' Envoys
// admit again once the heir grants.
func TestRLQS_process_envoysShareLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three node processes and waits for failure detection")
	}
	const burst, interval = 2000, 5 * time.Millisecond
	tr := startTrio(t, rlqsPolicy)
	owner, survivors := tr.split("acme")
	nodes := []*proc{survivors[0], survivors[1], owner, survivors[0]}
	rates := []int{300, 150, 50, 20}
	// Spend the burst first, through RLS on the same key, so that the
	// Envoys meet the limit at its edge: what they admit from then on is
	// the steady state, not the burst draining. Those admissions count in
	// the window check too.
	drained := drainBurst(t, owner, burst)
	var es []*envoyClient
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, p := range nodes {
		e := startEnvoy(t, p, rates[i])
		es = append(es, e)
		wg.Go(func() { e.run(stop) })
	}
	defer func() { close(stop); wg.Wait() }()

	start := time.Now()
	sleepUntil(start.Add(10 * time.Second)) // the Envoys subscribe and ramp up
	settled := time.Now()
	reqs0, msgs0 := requests(es), messages(es)
	sleepUntil(settled.Add(15 * time.Second))
	steady := time.Now()
	adm := allAdmitted(es)
	got := countIn(adm, settled, steady)
	want := steady.Sub(settled).Seconds() * float64(time.Second/interval)
	perReq := float64(messages(es)-msgs0) / float64(requests(es)-reqs0)
	t.Logf("steady: %d admitted in %s (%.2f of the limit's rate), %.4f stream messages per request", got, steady.Sub(settled), float64(got)/want, perReq)
	var denies, capped, unchanged, changed float64
	for _, p := range tr.nodes {
		denies += p.metricSum("weir_rlqs_assignments_total", `action="deny"`)
		unchanged += p.metricSum("weir_rlqs_assignments_total", `action="token_bucket_unchanged"`)
		changed += p.metricSum("weir_rlqs_assignments_total", `action="token_bucket"`)
		capped += p.metricSum("weir_lease_grants_total", `outcome="capped"`)
	}
	t.Logf("so far: %.0f token buckets (%.0f re-sent unchanged), %.0f denies; owners capped %.0f grants", changed+unchanged, unchanged, denies, capped)
	// The design figure (at least 0.9 of the rate under over-demand) is
	// asserted where time is simulated (rlqs's TestSession_steady_efficiency); here,
	// real processes on a shared machine measured 0.91 to 0.94 idle and
	// 0.895 under CI's parallel packages, as late ticks and late reports
	// waste bucket tokens. The floor catches a lost renewal or a stream
	// that stopped being served (each costs far more than 0.05), not the
	// machine's load.
	if float64(got) < 0.85*want {
		t.Errorf("admitted %d in %s, want at least 0.85 × %.0f", got, steady.Sub(settled), want)
	}
	if perReq > 0.02 {
		t.Errorf("%.4f stream messages per request, want under 0.02", perReq)
	}

	es[0].c.Cut() // a stream cut mid-run: the next report opens another
	sleepUntil(time.Now().Add(3 * time.Second))
	owner.kill()
	killed := time.Now()
	waitMembers(t, 30*time.Second, 2, survivors...)
	healed := len(allAdmitted(es))
	waitFor(t, 30*time.Second, func() bool { return len(allAdmitted(es)) > healed+200 })
	t.Logf("owner %s killed; 200 more admissions %s after the kill", owner.name, time.Since(killed))
	all := append(allAdmitted(es), drained...)
	slices.SortFunc(all, time.Time.Compare)
	checkWindows(t, all, burst, interval)
	var stranded float64
	for _, p := range survivors {
		stranded += p.metricSum("weir_rlqs_units_stranded_total", `limit="tenant"`)
	}
	// The cut stream's leases (at most two of lease.max) are the survivors'
	// to count; the killed node's streams died with it.
	if stranded > 2*2000 {
		t.Errorf("survivors count %.0f units stranded by ended streams, want at most 2 leases of 2000", stranded)
	}
	t.Logf("units stranded by ended streams on the survivors: %.0f", stranded)
}

// drainBurst spends the tenant limit's whole burst through p's RLS, in
// two calls of burst/2 units, and returns the admissions' times (the
// answers' arrival, the latest they can have been decided).
func drainBurst(t *testing.T, p *proc, burst int) []time.Time {
	t.Helper()
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := rlsv3.NewRateLimitServiceClient(conn)
	var out []time.Time
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: uint32(burst / 2),
			Descriptors: []*rlscommon.RateLimitDescriptor{{Entries: []*rlscommon.RateLimitDescriptor_Entry{{Key: "tenant", Value: "acme"}}}}})
		cancel()
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("spending the burst through RLS: %v, %v", resp, err)
		}
		for range burst / 2 {
			out = append(out, time.Now())
		}
	}
	return out
}

// sleepUntil sleeps until at, for phases of a load test measured in
// wall-clock time (not to wait for an outcome).
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

func requests(es []*envoyClient) int64 {
	var n int64
	for _, e := range es {
		n += e.requests.Load()
	}
	return n
}

func messages(es []*envoyClient) int64 {
	var n int64
	for _, e := range es {
		s, r, _ := e.c.Messages()
		n += s + r
	}
	return n
}

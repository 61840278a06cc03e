package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/ring"
)

// metricSum reads /metrics and sums the samples of name whose label text
// contains every one of labels (e.g. `outcome="spent"`).
func (p *proc) metricSum(name string, labels ...string) float64 {
	resp, err := http.Get("http://" + p.httpAd + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(line, l)
		}
		if f := strings.Fields(line); match && len(f) == 2 {
			v, _ := strconv.ParseFloat(f[1], 64)
			sum += v
		}
	}
	return sum
}

// hotPace is the gap between one client's requests: 20 a second per node,
// ten times the hot limit's rate, and enough demand for leases of 5 units.
const hotPace = 50 * time.Millisecond

// span is when a client sent a request and when the answer came back: the
// node decided it somewhere in between.
type span struct{ sent, answered time.Time }

// hotRun sends requests for one key through every node in nodes, one
// sequential client per node, until stop closes, and returns the spans of
// the requests the cluster admitted (fallback decisions fail closed and
// admit nothing).
func hotRun(nodes []*proc, sent *atomic.Int64, stop <-chan struct{}) []span {
	var mu sync.Mutex
	var admitted []span
	var wg sync.WaitGroup
	for _, p := range nodes {
		wg.Go(func() {
			pace := time.NewTicker(hotPace) // a steady load, not a wait
			defer pace.Stop()
			for {
				select {
				case <-stop:
					return
				case <-pace.C:
				}
				sent.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				sent := time.Now()
				d, err := p.client.Decide(ctx, &weirv1.DecideRequest{Descriptors: map[string]string{"tenant": "hot"}, Cost: new(int64(1))})
				answered := time.Now()
				cancel()
				if err == nil && d.Allowed && d.Fallback == nil {
					mu.Lock()
					admitted = append(admitted, span{sent, answered})
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return admitted
}

// checkSpans fails t if some window [a, b] surely holds more admissions
// than burst + (b-a)/interval: only requests sent at or after a and
// answered by b count, since each was decided inside its own span.
func checkSpans(t *testing.T, adm []span, burst int64, interval time.Duration) {
	t.Helper()
	slices.SortFunc(adm, func(x, y span) int { return x.sent.Compare(y.sent) })
	ends := make([]time.Time, 0, len(adm))
	for i := range adm {
		a := adm[i].sent
		ends = ends[:0]
		for _, s := range adm[i:] {
			ends = append(ends, s.answered)
		}
		slices.SortFunc(ends, time.Time.Compare)
		for m, b := range ends {
			if n := int64(m + 1); n > burst+int64(b.Sub(a)/interval) {
				t.Fatalf("%d admissions surely decided within %s; bound is %d + %s/%s", n, b.Sub(a), burst, b.Sub(a), interval)
			}
		}
	}
}

// TestLeases_process_ownerKilledMidRun runs three real nodes and a
// redis-server with a leasable hot key, sends requests for it through all
// three, SIGKILLs its owner mid-run and keeps sending through the
// survivors. In every window, the admissions surely decided inside it stay
// within B + W/T. The rate is low (2/s, burst 100) so that the seconds
// failure detection takes do not hide an excess: a new owner that loaded
// the key without the units its predecessor leased out, or a unit granted
// twice, would admit more than the window allows.
func TestLeases_process_ownerKilledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three node processes and waits for failure detection")
	}
	srv := redistest.Start(t)
	policyPath := filepath.Join(t.TempDir(), "policy.yaml")
	const burst, interval = 100, 500 * time.Millisecond
	pol := "version: lease-proc\nlimits:\n  - {name: hot, match: [tenant], rate: 2/s, burst: 100, on_failure: closed, lease: {max: 20, ttl: 250ms}}\n"
	if err := os.WriteFile(policyPath, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"WEIR_REDIS_ADDR=" + srv.Addr(), "WEIR_POLICY=" + policyPath, "WEIR_REDIS_TIMEOUT=1s"}
	a := startProc(t, "node-a", common...)
	join := "WEIR_JOIN=" + a.gossipAddr
	b := startProc(t, "node-b", append(common, join)...)
	c := startProc(t, "node-c", append(common, join)...)
	nodes := []*proc{a, b, c}
	waitFor(t, 20*time.Second, func() bool { return a.members() == 3 && b.members() == 3 && c.members() == 3 })
	r, _ := ring.New(ring.DefaultConfig(), "node-a", "node-b", "node-c")
	ownerName, _ := r.Owner("hot")
	var owner *proc
	var survivors []*proc
	for _, p := range nodes {
		if p.name == ownerName {
			owner = p
		} else {
			survivors = append(survivors, p)
		}
	}

	stop := make(chan struct{})
	var before []span
	done := make(chan struct{})
	var sent atomic.Int64
	go func() { before = hotRun([]*proc{owner}, &sent, stop); close(done) }()
	stopSurvivors := make(chan struct{})
	var after []span
	survDone := make(chan struct{})
	go func() { after = hotRun(survivors, &sent, stopSurvivors); close(survDone) }()
	spent := func() float64 {
		return survivors[0].metricSum("weir_lease_decisions_total", `outcome="spent"`) + survivors[1].metricSum("weir_lease_decisions_total", `outcome="spent"`)
	}
	waitFor(t, 20*time.Second, func() bool { return spent() >= 10 })
	close(stop) // the owner's client stops, then the owner dies mid-run
	<-done
	owner.cmd.Process.Signal(syscall.SIGKILL)
	<-owner.exited
	owner.cmd.Process = nil
	waitFor(t, 30*time.Second, func() bool { return survivors[0].members() == 2 && survivors[1].members() == 2 })
	killedAt := spent()
	converged := sent.Load()
	waitFor(t, 20*time.Second, func() bool { return sent.Load() >= converged+100 }) // 2.5s more of traffic
	close(stopSurvivors)
	<-survDone
	adm := append(before, after...)
	t.Logf("%d admissions; spent from leases at the survivors: %.0f before the kill, %.0f in all", len(adm), killedAt, spent())
	checkSpans(t, adm, burst, interval)
}

package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// metricSum reads /metrics and sums the samples of name whose label text
// contains every one of labels (e.g. `outcome="spent"`).
func (p *proc) metricSum(name string, labels ...string) float64 {
	return scrapeSum(http.DefaultClient, "http://"+p.httpAd+"/metrics", name, labels...)
}

// scrapeSum reads the Prometheus text exposition at url and sums the
// samples of name whose label text contains every one of labels; -1 when
// url does not answer.
func scrapeSum(c *http.Client, url, name string, labels ...string) float64 {
	resp, err := c.Get(url)
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

// grant is one lease an owner logged granting (grantLog): units emission
// slots of key, ending at tat.
type grant struct {
	key        string
	units, tat int64
}

var grantRE = regexp.MustCompile(`msg="lease granted" key=(\S+) peer=\S+ lease=\d+ units=(\d+) tat=(-?\d+)`)

// grants returns the leases p has logged granting so far, in order.
func (p *proc) grants() []grant {
	var out []grant
	for _, m := range grantRE.FindAllStringSubmatch(p.out.String(), -1) {
		units, _ := strconv.ParseInt(m[2], 10, 64)
		tat, _ := strconv.ParseInt(m[3], 10, 64)
		out = append(out, grant{key: m[1], units: units, tat: tat})
	}
	return out
}

// storedTAT reads key's TAT from srv as a new owner loads it.
func storedTAT(t *testing.T, srv *redistest.Server, key string) int64 {
	t.Helper()
	cfg := redisbackend.DefaultConfig()
	cfg.Timeout = 5 * time.Second // a loaded machine; this reads once
	b, err := redisbackend.New(srv.Client(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tats, err := b.LoadTATs(ctx, []string{key})
	if err != nil {
		t.Fatal(err)
	}
	return tats[0]
}

// TestLeases_process_ownerKilledMidRun runs three real nodes and a
// redis-server with a leasable hot key (2/s, burst 100), sends requests for
// it through all three until it is saturated, SIGKILLs its owner right
// after a grant and keeps sending through the survivors. No unit is
// granted twice: Redis holds every slot the dead owner granted, so the new
// owner loads them, and the new owner's first grant starts after them.
// Every owner logs its grants (grantLog, at debug level), which is how the
// test knows them. And in every window, the admissions surely decided
// inside it stay within B + W/T.
//
// The kill lands where only the grant write-through protects the units:
// the key is saturated, so each grant hands out slots beyond every unit
// admitted so far; the owner's own client has stopped; and a survivor's
// forward rarely wins a unit (one frees every 500ms) between the grant and
// the kill, so no admission at the owner carries the grant's TAT to Redis
// by write-behind. With the write-through disabled (HandleLease in
// leaselink/grants.go queueing no grant for StoreTATs), the Redis check failed
// in 10 runs of 10, 0.5s to 4s of granted slots missing; with that check
// made non-fatal, the new owner's first grant started inside them in 2 runs
// of 3; and the window bound held in every run:
// the seconds of failure detection, when the survivors fail closed, leave
// more room than the units lost. The bound alone cannot show this.
func TestLeases_process_ownerKilledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three node processes and waits for failure detection")
	}
	const burst, interval = 100, 500 * time.Millisecond
	pol := "version: lease-proc\nlimits:\n  - {name: hot, match: [tenant], rate: 2/s, burst: 100, on_failure: closed, lease: {max: 20, ttl: 250ms}}\n"
	tr := startTrio(t, pol, "WEIR_LOG_LEVEL=debug") // debug: owners log their grants
	owner, survivors := tr.split("hot")

	var sent atomic.Int64
	stopOwner, stopSurvivors := make(chan struct{}), make(chan struct{})
	ownerDone, survDone := make(chan struct{}), make(chan struct{})
	var before, after []span
	go func() { before = hotRun([]*proc{owner}, &sent, stopOwner); close(ownerDone) }()
	go func() { after = hotRun(survivors, &sent, stopSurvivors); close(survDone) }()
	// Saturated: the owner denied a lease because not one unit fitted.
	waitFor(t, 30*time.Second, func() bool { return owner.metricSum("weir_lease_grants_total", `outcome="denied"`) >= 1 })
	close(stopOwner)
	<-ownerDone
	seen := len(owner.grants())
	waitFor(t, 30*time.Second, func() bool { return len(owner.grants()) > seen })
	owner.kill() // right after a grant; its log is complete once it has exited
	granted := owner.grants()
	var last int64 // the end of the last slot the dead owner granted
	for _, g := range granted {
		last = max(last, g.tat)
	}
	key := granted[0].key
	if stored := storedTAT(t, tr.redis, key); stored < last {
		t.Fatalf("%s granted %d leases of %s up to TAT %d, but Redis holds %d: the new owner would grant the last %s of them again",
			owner.name, len(granted), key, last, stored, time.Duration(last-stored))
	}

	heir, _ := ownerOf("hot", survivors)
	// Only the heir's grants after the kill: a false suspicion under load
	// may have made it the owner for a while before.
	earlier := len(heir.grants())
	waitMembers(t, 30*time.Second, 2, survivors...)
	waitFor(t, 30*time.Second, func() bool { return len(heir.grants()) > earlier })
	first := heir.grants()[earlier]
	from := first.tat - first.units*int64(interval) // where its slots start
	if from < last {
		t.Fatalf("new owner %s granted %d units from TAT %d, %s before the end of the slots %s granted (%d): granted twice",
			heir.name, first.units, from, time.Duration(last-from), owner.name, last)
	}
	converged := sent.Load()
	waitFor(t, 20*time.Second, func() bool { return sent.Load() >= converged+100 }) // 2.5s more of traffic
	close(stopSurvivors)
	<-survDone
	adm := append(before, after...)
	t.Logf("%d admissions; %s granted %d leases up to TAT %d, %s's first grant starts %s after it",
		len(adm), owner.name, len(granted), last, heir.name, time.Duration(from-last))
	checkSpans(t, adm, burst, interval)
}

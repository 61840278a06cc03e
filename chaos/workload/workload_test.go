package workload

import (
	"bytes"
	"cmp"
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/chaos/history"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/server"
	"github.com/weirhq/weir/server/servertest"
)

// node serves the built-in policy from memory over real gRPC.
func node(t *testing.T) string {
	t.Helper()
	lim, err := limiter.New(limiter.DefaultConfig(), policy.Static(policy.Builtin()),
		limiter.MemoryStore(memstore.New(memstore.DefaultConfig())), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return servertest.Serve(t, server.NewGRPCService(lim, nil))
}

// blackhole accepts connections and never answers.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return ln.Addr().String()
}

func TestRunRecordsEveryOutcome(t *testing.T) {
	cfg := Config{
		Targets: []Target{{Name: "up", Addr: node(t)}, {Name: "hole", Addr: blackhole(t)}},
		Classes: []Class{{Name: "hot", Weight: 1, Keys: 1, Cost: 1, Limits: []string{"per-user", "per-tenant"},
			Descriptors: map[string]string{"tenant": "t{k}", "user": "u"}}},
		Rate: 200, Duration: time.Second, Deadline: 100 * time.Millisecond, MaxInFlight: 1000, Seed: 1,
	}
	var buf bytes.Buffer
	w := history.NewWriter(&buf)
	w.Header(history.Header{Scenario: "t", Limits: []history.LimitSpec{{Name: "per-user", Interval: 200 * time.Millisecond, Burst: 3}}})
	st, err := Run(context.Background(), cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ops != 200 || len(h.Ops) != 200 {
		t.Fatalf("ops: stats %d, history %d; want 200", st.Ops, len(h.Ops))
	}
	byNode := map[string]map[history.Outcome]int{"up": {}, "hole": {}}
	for _, op := range h.Ops {
		byNode[op.Node][op.Outcome]++
		switch {
		case op.Node == "hole" && op.Outcome.Answered():
			t.Fatalf("a call to a node that never answers answered %s after %s: %s", op.Outcome, op.Latency(), op.Err)
		case op.Node == "hole" && op.Latency() > 150*time.Millisecond:
			t.Fatalf("a timed-out call waited %s, past its 100ms deadline", op.Latency())
		case op.Node == "up" && op.Outcome.Answered() && (len(op.Limits) != 2 || op.Limits[0].Key == ""):
			t.Fatalf("answered call without its limit keys: %+v", op)
		}
	}
	// The built-in per-user limit is 5/s burst 3: over one second a single
	// key admits about 3 + 5, and the rest are denied.
	up := byNode["up"]
	if up[history.Allowed] < 6 || up[history.Allowed] > 9 || up[history.Denied] == 0 {
		t.Fatalf("outcomes at the live node: %v", up)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	cfg := Config{
		Targets: []Target{{Name: "up", Addr: node(t)}},
		Classes: []Class{{Name: "c", Weight: 1, Keys: 10, Cost: 1, Descriptors: map[string]string{"tenant": "t{k}"}}},
		Rate:    100, Duration: time.Hour, Deadline: time.Second, MaxInFlight: 10,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var buf bytes.Buffer
	st, err := Run(ctx, cfg, history.NewWriter(&buf))
	if err != nil {
		t.Fatal(err)
	}
	if st.Ops < 20 || st.Ops > 40 {
		t.Fatalf("ran %d ops in 300ms at 100/s", st.Ops)
	}
}

func TestRun_closedLoopWaitsForAnswers(t *testing.T) {
	cfg := Config{
		Targets: []Target{{Name: "up", Addr: node(t)}, {Name: "hole", Addr: blackhole(t)}},
		Classes: []Class{{Name: "hot", Weight: 1, Keys: 1, Cost: 1, Limits: []string{"per-tenant"},
			Descriptors: map[string]string{"tenant": "t"}}},
		Workers: 4, Duration: 500 * time.Millisecond, Deadline: 100 * time.Millisecond,
	}
	var buf bytes.Buffer
	w := history.NewWriter(&buf)
	w.Header(history.Header{Scenario: "t", Limits: []history.LimitSpec{{Name: "per-tenant", Interval: 10 * time.Millisecond, Burst: 50}}})
	if _, err := Run(context.Background(), cfg, w); err != nil {
		t.Fatal(err)
	}
	h, err := history.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// Closed loop: never more calls in flight than workers, however long
	// the silent node keeps its callers waiting.
	type edge struct {
		t     int64
		delta int
	}
	var edges []edge
	count := map[string]int{}
	for _, op := range h.Ops {
		count[op.Node]++
		if op.Node == "hole" && op.Outcome.Answered() {
			t.Fatalf("a call to a node that never answers was answered: %+v", op)
		}
		edges = append(edges, edge{op.Invoke, 1}, edge{op.Complete, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.delta, b.delta)) })
	inFlight, most := 0, 0
	for _, e := range edges {
		inFlight += e.delta
		most = max(most, inFlight)
	}
	if most > cfg.Workers {
		t.Fatalf("%d calls in flight at once from %d closed-loop workers", most, cfg.Workers)
	}
	if count["up"] < 20 || count["hole"] == 0 {
		t.Fatalf("calls per node %v: want both nodes called, the live one often", count)
	}
	if bad := (Config{Targets: cfg.Targets, Classes: cfg.Classes, Workers: -1, Duration: 1, Deadline: 1}); bad.Validate() == nil {
		t.Fatal("negative workers accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err == nil {
		t.Fatal("empty config accepted")
	}
	bad := Config{Targets: []Target{{"a", "x:1"}}, Classes: []Class{{Name: "c", Weight: 1, Keys: 0, Cost: 1,
		Descriptors: map[string]string{"a": "b"}}}, Rate: 1, Duration: 1, Deadline: 1, MaxInFlight: 1}
	if err := bad.Validate(); err == nil {
		t.Fatal("class with zero keys accepted")
	}
}

func TestConfig_Validate_rlqs(t *testing.T) {
	ok := Config{Targets: []Target{{Name: "n1", Addr: "127.0.0.1:1"}}, Rate: 10, Duration: time.Second, Deadline: time.Second, MaxInFlight: 1,
		Classes: []Class{{Name: "e", Weight: 1, Keys: 1, Cost: 1, Limits: []string{"l"}, Descriptors: map[string]string{"tenant": "a"},
			RLQS: &RLQS{Domain: "edge", Key: "weir:{a}:l:a", ReportingInterval: time.Second}}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(c *Config){
		"no key":      func(c *Config) { c.Classes[0].RLQS.Key = "" },
		"cost 2":      func(c *Config) { c.Classes[0].Cost = 2 },
		"two keys":    func(c *Config) { c.Classes[0].Keys = 2 },
		"closed loop": func(c *Config) { c.Workers = 3 },
	} {
		c := ok
		c.Classes = []Class{ok.Classes[0]}
		r := *ok.Classes[0].RLQS
		c.Classes[0].RLQS = &r
		mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "rlqs class") {
			t.Errorf("%s: %v, want an rlqs class error", name, err)
		}
	}
}

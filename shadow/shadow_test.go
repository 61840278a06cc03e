package shadow

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/limiter"
)

// TestTopK_againstExactCounts checks Space-Saving's guarantees on skewed
// streams against a naive exact count: every key with more than total/k
// occurrences is reported, and every estimate brackets the true count.
func TestTopK_againstExactCounts(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		const k, n = 20, 5000
		tk, exact := newTopK(k), map[string]int64{}
		zipf := rand.NewZipf(rng, 1.3, 2, 500)
		for range n {
			key := fmt.Sprintf("k%d", zipf.Uint64())
			tk.add(key, 1)
			exact[key]++
		}
		got := map[string]Count{}
		for _, c := range tk.top(k) {
			got[c.Key] = c
			if true := exact[c.Key]; c.Count < true || c.Count-c.Err > true {
				t.Fatalf("seed %d: %s estimated %d±%d, true %d", seed, c.Key, c.Count, c.Err, true)
			}
		}
		for key, cnt := range exact {
			if cnt > n/k {
				if _, ok := got[key]; !ok {
					t.Fatalf("seed %d: heavy key %s (%d of %d) missing", seed, key, cnt, n)
				}
			}
		}
		if len(tk.items) > k || len(tk.heap) > k {
			t.Fatalf("sketch grew to %d items", len(tk.items))
		}
	}
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func shadowDenial(limit, key string) limiter.Decision {
	return limiter.Decision{Allowed: true, Matched: true, Limits: []limiter.LimitDecision{
		{Name: "enforced", Key: "e", Allowed: true},
		{Name: limit, Key: key, Shadow: true, Allowed: false},
	}}
}

func TestRecorder_bucketsAndSince(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	cfg := Config{Keys: 3, Bucket: time.Hour, Buckets: 3, MaxLimits: 1}
	r, err := New(cfg, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	r.Observe(shadowDenial("new", "alice"))
	r.Observe(limiter.Decision{Limits: []limiter.LimitDecision{{Name: "new", Key: "bob", Shadow: true, Allowed: true}}}) // would pass: not counted
	clk.Advance(time.Hour)
	for range 3 {
		r.Observe(shadowDenial("new", "bob"))
	}
	r.Observe(shadowDenial("other", "x")) // over MaxLimits
	clk.Advance(30 * time.Minute)

	all := r.Report(0)
	if len(all.Limits) != 1 || all.Limits[0].WouldDeny != 4 || all.Dropped != 1 {
		t.Fatalf("all = %+v", all)
	}
	if top := all.Limits[0].Top; len(top) != 2 || top[0] != (Count{Key: "bob", Count: 3}) || top[1] != (Count{Key: "alice", Count: 1}) {
		t.Errorf("top = %+v", top)
	}
	recent := r.Report(20 * time.Minute) // only the current bucket
	if recent.Limits[0].WouldDeny != 3 || !recent.From.Equal(clk.Now().Truncate(time.Hour)) {
		t.Errorf("recent = %+v", recent)
	}
	clk.Advance(5 * time.Hour) // every bucket ages out once a new one starts
	r.Observe(shadowDenial("new", "carol"))
	if rep := r.Report(0); rep.Limits[0].WouldDeny != 1 {
		t.Errorf("after aging: %+v", rep)
	}
}

func TestMerge(t *testing.T) {
	a := Report{Nodes: []string{"a"}, Limits: []LimitReport{{Limit: "l", WouldDeny: 5, Top: []Count{{Key: "x", Count: 4}, {Key: "y", Count: 1}}}}}
	b := Report{Nodes: []string{"b"}, Limits: []LimitReport{{Limit: "l", WouldDeny: 3, Top: []Count{{Key: "y", Count: 3, Err: 1}}}, {Limit: "m", WouldDeny: 1, Top: []Count{{Key: "z", Count: 1}}}}}
	got := Merge(2, a, b)
	if len(got.Nodes) != 2 || len(got.Limits) != 2 || got.Limits[1].Limit != "m" {
		t.Fatalf("got %+v", got)
	}
	want := []Count{{Key: "x", Count: 4}, {Key: "y", Count: 4, Err: 1}} // a tie goes by key
	if l := got.Limits[0]; l.WouldDeny != 8 || len(l.Top) != 2 || l.Top[0] != want[0] || l.Top[1] != want[1] {
		t.Errorf("l = %+v, want would_deny 8 and top %v", l, want)
	}
	if one := Merge(1, a, b); len(one.Limits[0].Top) != 1 {
		t.Errorf("Merge(1) kept %d keys", len(one.Limits[0].Top))
	}
}

func TestHandler(t *testing.T) {
	r, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Observe(shadowDenial("new", "k"))
	srv := httptest.NewServer(r.Handler("node-1"))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "?since=1h")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Nodes) != 1 || rep.Nodes[0] != "node-1" || rep.Limits[0].WouldDeny != 1 {
		t.Errorf("rep = %+v", rep)
	}
	for _, q := range []string{"?since=soon", "?since=-1h"} {
		resp, err := http.Get(srv.URL + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d", q, resp.StatusCode)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{}, nil); err == nil {
		t.Fatal("zero config accepted")
	}
}

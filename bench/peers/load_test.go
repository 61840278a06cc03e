package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// countingDecider admits the first `admit` decisions and denies the rest;
// every failEvery-th call fails instead (0: never). It records the keys asked.
type countingDecider struct {
	mu        sync.Mutex
	calls     int
	admit     int
	failEvery int
	keys      map[string]int
}

func (d *countingDecider) decide(ctx context.Context, key string) (bool, error) {
	if _, ok := ctx.Deadline(); !ok {
		return false, errors.New("no deadline on the call")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.failEvery > 0 && d.calls%d.failEvery == 0 {
		return false, errors.New("injected")
	}
	if d.keys == nil {
		d.keys = make(map[string]int)
	}
	d.keys[key]++
	if d.admit > 0 {
		d.admit--
		return true, nil
	}
	return false, nil
}

func TestRunLoad_countsOnlyAfterWarmup(t *testing.T) {
	d := &countingDecider{admit: 1 << 30, failEvery: 7}
	cfg := loadConfig{workers: 4, warmup: 50 * time.Millisecond, duration: 100 * time.Millisecond, timeout: time.Second}
	r := runLoad(context.Background(), cfg, workload{name: "spread", keys: 50}, []decider{d, d}, nil)

	if r.decisions == 0 || r.errors == 0 {
		t.Fatalf("decisions %d, errors %d: want both counted", r.decisions, r.errors)
	}
	total := int64(d.calls)
	if got := r.decisions + r.errors; got >= total {
		t.Errorf("counted %d of %d calls: the warm-up's calls must not count", got, total)
	}
	if r.admitted != r.decisions {
		t.Errorf("admitted %d of %d decisions, the decider admitted all", r.admitted, r.decisions)
	}
	if len(r.spans) != 0 {
		t.Errorf("%d spans kept on a workload of 50 keys", len(r.spans))
	}
	if int64(len(r.latencies)) != r.decisions {
		t.Errorf("%d latencies for %d decisions", len(r.latencies), r.decisions)
	}
	if r.window < cfg.duration/2 || r.window > cfg.duration+cfg.timeout {
		t.Errorf("window %v for a measured duration of %v", r.window, cfg.duration)
	}
	if len(d.keys) < 2 {
		t.Errorf("keys asked %v: want them spread over the workload's keys", d.keys)
	}
	valid := make(map[string]bool)
	for i := range 50 {
		valid[fmt.Sprintf("key-%d", i)] = true
	}
	for k := range d.keys {
		if !valid[k] {
			t.Errorf("key %q is not one of the workload's 50", k)
		}
	}
}

func TestRunLoad_hotKeyAdmittedAgainstBound(t *testing.T) {
	d := &countingDecider{admit: 3}
	cfg := loadConfig{workers: 2, duration: 50 * time.Millisecond, timeout: time.Second}
	r := runLoad(context.Background(), cfg, hotKey, []decider{d}, nil)

	if r.admitted != 3 {
		t.Errorf("admitted %d, want the 3 the decider allowed (no warm-up)", r.admitted)
	}
	if len(r.spans) != 3 || r.spans[0].reply.Before(r.spans[0].sent) {
		t.Errorf("spans %v: want one [sent, reply] per admission", r.spans)
	}
	if len(d.keys) != 1 || d.keys["key-0"] == 0 {
		t.Errorf("keys asked %v, want only key-0", d.keys)
	}
	want := limitBurst + r.window.Seconds()*limitPerSecond
	if r.bound() != want {
		t.Errorf("bound %v, want B + W/T = %v", r.bound(), want)
	}
}

func TestRunLoad_stopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := &countingDecider{}
	cfg := loadConfig{workers: 2, duration: time.Hour, timeout: time.Second}
	done := make(chan result)
	go func() { done <- runLoad(ctx, cfg, spread, []decider{d}, nil) }()
	select {
	case r := <-done:
		if r.decisions != 0 {
			t.Errorf("%d decisions after the context ended", r.decisions)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runLoad did not stop when its context ended")
	}
}

func TestResult_quantile(t *testing.T) {
	r := result{latencies: []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 5}, {0.51, 6}, {0.99, 10}, {1, 10}} {
		if got := r.quantile(c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := (result{}).quantile(0.99); got != 0 {
		t.Errorf("empty quantile = %v, want 0", got)
	}
}

func TestResult_maxAdmittedIn(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(sentMs, replyMs int) span {
		return span{sent: t0.Add(time.Duration(sentMs) * time.Millisecond), reply: t0.Add(time.Duration(replyMs) * time.Millisecond)}
	}
	r := result{spans: []span{
		at(0, 1), at(100, 101), at(900, 999), // three inside [0, 1000]
		at(950, 1100), // sent inside, answered after: not certain
		at(1000, 1001), at(1500, 1501), at(1900, 1950), at(1950, 1951),
	}}
	// [950, 1950] holds 4 that were surely decided inside it: 1000, 1500,
	// 1900 and 950..1100; [1000, 2000] holds 1000, 1500, 1900, 1950.
	if got := r.maxAdmittedIn(time.Second); got != 4 {
		t.Errorf("maxAdmittedIn(1s) = %d, want 4", got)
	}
	if got := r.maxAdmittedIn(10 * time.Second); got != len(r.spans) {
		t.Errorf("maxAdmittedIn(10s) = %d, want all %d", got, len(r.spans))
	}
	if got := (result{}).maxAdmittedIn(time.Second); got != 0 {
		t.Errorf("no spans: %d, want 0", got)
	}
	if got := benchLimit.boundIn(time.Second); got != limitBurst+limitPerSecond {
		t.Errorf("boundIn(1s) = %v, want B + 1s/T = %d", got, limitBurst+limitPerSecond)
	}
}

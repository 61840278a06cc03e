package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/server/servertest"
)

// runBenchJSON runs "weir bench --json" with args and decodes the summary.
func runBenchJSON(t *testing.T, ctx context.Context, args ...string) (int, *summary) {
	t.Helper()
	code, stdout, stderr := runCLI(ctx, append([]string{"bench", "--json", "--warmup", "0s", "--timeout", "10s"}, args...)...)
	var s summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("exit %d, summary is not JSON: %v\nstdout %q\nstderr %q", code, err, stdout, stderr)
	}
	if code != exitOK {
		t.Logf("exit %d, stderr %q, summary %+v", code, stderr, s)
	}
	return code, &s
}

// checkConsistent checks that a summary adds up and matches what the server
// saw. batch is the requests per RPC.
func checkConsistent(t *testing.T, s *summary, f *fakeNode, batch int64) {
	t.Helper()
	var failed int64
	for _, n := range s.Errors {
		failed += n
	}
	rpcs, _, _ := f.stats()
	// An RPC that timed out (a loaded test machine) may or may not have
	// reached the server; every other RPC did, exactly once.
	lost := s.Requests - s.Errors["Unavailable"] - s.Decisions/batch
	switch {
	case s.Requests == 0:
		t.Error("no requests were made")
	case int64(rpcs) > s.Requests || int64(rpcs) < s.Requests-lost:
		t.Errorf("server saw %d RPCs, bench reports %d of which %d timed out (errors %v)", rpcs, s.Requests, lost, s.Errors)
	case s.Decisions != (s.Requests-failed)*batch:
		t.Errorf("decisions %d != (requests %d - errors %d) * batch %d", s.Decisions, s.Requests, failed, batch)
	case s.Allowed+s.Denied != s.Decisions:
		t.Errorf("allowed %d + denied %d != decisions %d", s.Allowed, s.Denied, s.Decisions)
	case !(s.Latency.P50 > 0 && s.Latency.P50 <= s.Latency.P99 && s.Latency.P99 <= s.Latency.Max):
		t.Errorf("latency out of order: %+v", s.Latency)
	case s.Elapsed <= 0 || s.DecisionsPerSec <= 0:
		t.Errorf("elapsed %v, rate %v", s.Elapsed, s.DecisionsPerSec)
	}
}

func TestRunBench_closedLoop(t *testing.T) {
	f := &fakeNode{}
	addr := servertest.Serve(t, f)
	code, s := runBenchJSON(t, t.Context(), "--addr", addr, "--duration", "300ms", "--workers", "4", "--conns", "2", "--keys", "4")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	checkConsistent(t, s, f, 1)
	if s.Errors["Unavailable"] == 0 || s.Allowed == 0 || s.Denied == 0 {
		t.Errorf("want some of each outcome: %+v", s)
	}
	if s.Mode != "closed" || s.Elapsed > 0.3 {
		t.Errorf("mode %q, elapsed %v", s.Mode, s.Elapsed)
	}
}

func TestRunBench_closedLoopBatches(t *testing.T) {
	f := &fakeNode{}
	addr := servertest.Serve(t, f)
	code, s := runBenchJSON(t, t.Context(), "--addr", addr, "--duration", "200ms", "--batch", "3", "--keys", "1", "--cost", "2")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	checkConsistent(t, s, f, 3)
	if _, items, _ := f.stats(); int64(items) < s.Decisions || s.Allowed != s.Decisions {
		t.Errorf("server decided %d items; bench reports %d decisions, %d allowed", items, s.Decisions, s.Allowed)
	}
}

// TestRunBench_batchesCountEachItem: the batch load counts each item's
// answer, allowed or denied, and a failed batch as one error.
func TestRunBench_batchesCountEachItem(t *testing.T) {
	f := &fakeNode{}
	addr := servertest.Serve(t, f)
	code, s := runBenchJSON(t, t.Context(), "--addr", addr, "--duration", "300ms", "--batch", "2", "--keys", "4", "--workers", "2")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	checkConsistent(t, s, f, 2)
	if _, _, keys := f.stats(); s.Allowed == 0 || s.Denied == 0 || s.Errors["Unavailable"] == 0 || len(keys) != 4 {
		t.Errorf("allowed %d, denied %d, errors %v, server saw keys %v; want some of each, and 4 keys", s.Allowed, s.Denied, s.Errors, keys)
	}
}

// TestRunBench_batchAnswerTooShort: an answer without one response per
// request is an error, not a shorter batch.
func TestRunBench_batchAnswerTooShort(t *testing.T) {
	f := &fakeNode{short: true}
	addr := servertest.Serve(t, f)
	code, s := runBenchJSON(t, t.Context(), "--addr", addr, "--duration", "100ms", "--batch", "3", "--keys", "1")
	if code != exitError || s.Decisions != 0 || s.Errors["Internal"] != s.Requests || s.Requests == 0 {
		t.Errorf("exit %d, summary %+v; want every RPC failed INTERNAL", code, s)
	}
}

func TestRunBench_openLoop(t *testing.T) {
	f := &fakeNode{}
	addr := servertest.Serve(t, f)
	code, s := runBenchJSON(t, t.Context(), "--addr", addr, "--mode", "open", "--rate", "2000", "--duration", "300ms", "--keys", "4")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	checkConsistent(t, s, f, 1)
	// 2000/s for 300ms schedules exactly 600 arrivals, each sent or dropped
	// however late the dispatcher runs.
	if s.Arrivals != 600 || s.Requests != s.Arrivals-s.Dropped {
		t.Errorf("arrivals %d, dropped %d, requests %d", s.Arrivals, s.Dropped, s.Requests)
	}
}

func TestRunBench_openLoopCountsQueueingAndDrops(t *testing.T) {
	f := &fakeNode{delay: 20 * time.Millisecond}
	addr := servertest.Serve(t, f)
	// One worker and a queue of one against a server taking 20ms: most
	// arrivals are dropped, and the queued ones wait up to another 20ms.
	code, s := runBenchJSON(t, t.Context(), "--addr", addr, "--mode", "open", "--rate", "1000", "--duration", "200ms", "--workers", "1", "--keys", "1")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	checkConsistent(t, s, f, 1)
	if s.Dropped == 0 || s.Requests != s.Arrivals-s.Dropped {
		t.Errorf("arrivals %d, dropped %d, requests %d", s.Arrivals, s.Dropped, s.Requests)
	}
	// Measured from the schedule, a queued request waits for the one in
	// flight: the slowest took well over one server delay.
	if s.Latency.Max < 30_000 {
		t.Errorf("max latency %vus; queueing delay is not counted", s.Latency.Max)
	}
}

func TestRunBench_hotKey(t *testing.T) {
	f := &fakeNode{}
	addr := servertest.Serve(t, f)
	if code, _ := runBenchJSON(t, t.Context(), "--addr", addr, "--duration", "100ms", "--keys", "100", "--hot", "1"); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if _, _, keys := f.stats(); len(keys) != 1 || !keys["key-0"] {
		t.Errorf("server saw keys %v, want only key-0", keys)
	}
}

func TestRunBench_interruptStillReports(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f := &fakeNode{onRPC: func(n int) {
		if n == 100 {
			cancel() // Ctrl-C
		}
	}}
	addr := servertest.Serve(t, f)
	code, s := runBenchJSON(t, ctx, "--addr", addr, "--duration", "1h", "--keys", "1")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	checkConsistent(t, s, f, 1)
	if s.Elapsed > 60 {
		t.Errorf("elapsed %vs: the interrupt did not stop the run", s.Elapsed)
	}
}

func TestRunBench_humanSummary(t *testing.T) {
	addr := servertest.Serve(t, &fakeNode{})
	code, stdout, stderr := runCLI(t.Context(), "bench", "--addr", addr, "--mode", "open", "--rate", "500", "--duration", "100ms", "--warmup", "50ms", "--keys", "4")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	// Which RPCs finish in 100ms depends on the machine (a starved process
	// may drop every arrival), so the error breakdown is checked on a
	// summary built by hand below.
	for _, want := range []string{"open loop at 500/s", "requests ", "decisions ", "allowed ", "denied ", "errors ", "dropped ", "latency     p50 "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
}

func TestFormatSummary_errorsAndClosedLoop(t *testing.T) {
	closed := &summary{Mode: "closed", Workers: 8, Conns: 4, Batch: 10, Requests: 100, Decisions: 900, DecisionsPerSec: 9000,
		Errors: map[string]int64{"Unavailable": 10}}
	open := &summary{Mode: "open", Rate: 450, Workers: 8, Conns: 4, Batch: 10, Requests: 40, Decisions: 370, Arrivals: 45, Dropped: 5,
		Errors: map[string]int64{"Unavailable": 2, "DeadlineExceeded": 1}, ClosedLoop: closed}
	got := formatSummary(open)
	for _, want := range []string{
		"closed loop, 8 workers, 4 connections, batch 10\n",
		"errors      10 (Unavailable=10)\n",
		"then at half the 900.0 RPCs/s answered above:\nopen loop at 450/s, at most 8 in flight",
		"errors      3 (DeadlineExceeded=1, Unavailable=2)\n",
		"dropped     5 of 45 arrivals\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

func TestRunBench_unreachableIsAnError(t *testing.T) {
	code, stdout, stderr := runCLI(t.Context(), "bench", "--addr", "127.0.0.1:1", "--duration", "100ms", "--warmup", "0s", "--workers", "1", "--conns", "1")
	if code != exitError || !strings.Contains(stderr, "every request failed") || !strings.Contains(stdout, "Unavailable") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// --rate half measures the closed-loop maximum first, then runs the open
// loop at half its answered RPCs/s, and reports both.
func TestRunBench_openLoopAtHalfTheClosedLoopMaximum(t *testing.T) {
	f := &fakeNode{delay: 2 * time.Millisecond}
	addr := servertest.Serve(t, f)
	code, s := runBenchJSON(t, t.Context(), "--addr", addr, "--mode", "open", "--rate", "half", "--duration", "300ms", "--workers", "4", "--keys", "4", "--batch", "2")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	c := s.ClosedLoop
	if c == nil || c.Mode != "closed" || c.Requests == 0 {
		t.Fatalf("closed loop %+v, want a measured closed-loop run", c)
	}
	if want := c.DecisionsPerSec / 2 / 2; s.Mode != "open" || s.Rate != want {
		t.Errorf("mode %q at %v/s, want open at %v/s (half of %v decisions/s in batches of 2)", s.Mode, s.Rate, want, c.DecisionsPerSec)
	}
	// The open loop's arrivals follow from its rate: rate x 300ms, give or
	// take the one on the boundary.
	if want := s.Rate * 0.3; float64(s.Arrivals) < want-1 || float64(s.Arrivals) > want+1 {
		t.Errorf("%d arrivals at %v/s for 300ms", s.Arrivals, s.Rate)
	}
}

// With nothing answering, --rate half reports the closed loop and fails.
func TestRunBench_rateHalfWithNoAnswer(t *testing.T) {
	code, stdout, stderr := runCLI(t.Context(), "bench", "--addr", "127.0.0.1:1", "--mode", "open", "--rate", "half", "--duration", "100ms", "--warmup", "0s", "--workers", "1", "--conns", "1")
	if code != exitError || !strings.Contains(stderr, "every request failed") || !strings.Contains(stdout, "closed loop") || strings.Contains(stdout, "open loop") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestRunBench_rateFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "half"}, "--rate half needs --mode open"},
		{[]string{"--mode", "open", "--rate", "fast"}, `want arrivals per second or half, got "fast"`},
		{[]string{"--mode", "open", "--rate", "0"}, "--rate must be positive"},
	} {
		code, _, stderr := runCLI(t.Context(), append([]string{"bench", "--addr", "127.0.0.1:1"}, tt.args...)...)
		if code != exitError || !strings.Contains(stderr, tt.want) {
			t.Errorf("bench %v: exit %d, stderr %q, want %q", tt.args, code, stderr, tt.want)
		}
	}
}

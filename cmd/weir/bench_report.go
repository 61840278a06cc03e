package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// tally is one worker's count of what it measured. Not safe for concurrent
// use; tallies are merged after the workers stop.
type tally struct {
	requests, decisions, allowed, denied int64
	errors                               map[string]int64 // by gRPC code
	latency                              *histogram       // nanoseconds per RPC
}

func newTally() *tally {
	return &tally{errors: map[string]int64{}, latency: newHistogram()}
}

func (t *tally) record(latency time.Duration, resps []*weirv1.DecideResponse, err error) {
	var allowed int64
	for _, r := range resps {
		if r.GetAllowed() {
			allowed++
		}
	}
	t.recordCounts(latency, allowed, int64(len(resps))-allowed, err)
}

// recordCounts records one RPC that answered allowed + denied decisions,
// or failed with err.
func (t *tally) recordCounts(latency time.Duration, allowed, denied int64, err error) {
	t.requests++
	t.latency.Record(int64(latency))
	if err != nil {
		t.errors[status.Code(err).String()]++
		return
	}
	t.decisions += allowed + denied
	t.allowed += allowed
	t.denied += denied
}

// summary is what bench reports; its JSON form is the --json output.
type summary struct {
	Mode      string  `json:"mode"`
	Workers   int     `json:"workers"`
	Conns     int     `json:"conns"`
	Batch     int     `json:"batch"`
	Rate      float64 `json:"rate,omitempty"` // open loop only
	Warmup    float64 `json:"warmup_seconds"`
	Elapsed   float64 `json:"elapsed_seconds"` // measured time
	Requests  int64   `json:"requests"`        // RPCs completed, failed ones included
	Decisions int64   `json:"decisions"`       // answers; a batch counts each item
	// DecisionsPerSec and RequestsPerSec are over Elapsed.
	DecisionsPerSec float64          `json:"decisions_per_sec"`
	RequestsPerSec  float64          `json:"requests_per_sec"`
	Allowed         int64            `json:"allowed"`
	Denied          int64            `json:"denied"`
	Errors          map[string]int64 `json:"errors"`             // RPCs by gRPC code
	Arrivals        int64            `json:"arrivals,omitempty"` // open loop: scheduled
	Dropped         int64            `json:"dropped"`            // open loop: never sent
	Latency         latencySummary   `json:"latency_us"`         // per RPC
	// ClosedLoop is the closed-loop run that --rate half measured first;
	// Rate is then half its answered RPCs/s.
	ClosedLoop *summary `json:"closed_loop,omitempty"`
}

// latencySummary is in microseconds.
type latencySummary struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func (b *bench) summarize(workers []*worker, elapsed time.Duration, arrivals, dropped int64) *summary {
	all := newTally()
	for _, w := range workers {
		t := w.tally
		all.requests += t.requests
		all.decisions += t.decisions
		all.allowed += t.allowed
		all.denied += t.denied
		for code, n := range t.errors {
			all.errors[code] += n
		}
		all.latency.Merge(t.latency)
	}
	s := &summary{
		Mode: b.cfg.mode, Workers: b.cfg.workers, Conns: b.cfg.conns, Batch: b.cfg.batch,
		Warmup: b.cfg.warmup.Seconds(), Elapsed: elapsed.Seconds(),
		Requests: all.requests, Decisions: all.decisions,
		Allowed: all.allowed, Denied: all.denied, Errors: all.errors,
		Arrivals: arrivals, Dropped: dropped,
	}
	if b.cfg.mode == "open" {
		s.Rate = b.cfg.rate
	}
	if elapsed > 0 {
		s.DecisionsPerSec = float64(all.decisions) / elapsed.Seconds()
		s.RequestsPerSec = float64(all.requests) / elapsed.Seconds()
	}
	h := all.latency
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	s.Latency = latencySummary{
		P50: us(h.Quantile(0.5)), P90: us(h.Quantile(0.9)), P99: us(h.Quantile(0.99)),
		P999: us(h.Quantile(0.999)), Max: us(h.Max()), Mean: h.Mean() / 1e3,
	}
	return s
}

func printSummary(w io.Writer, s *summary, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s); err != nil {
			return fmt.Errorf("encode summary: %w", err)
		}
		return nil
	}
	_, err := io.WriteString(w, formatSummary(s))
	return err
}

func formatSummary(s *summary) string {
	var b strings.Builder
	if c := s.ClosedLoop; c != nil {
		b.WriteString(formatSummary(c))
		fmt.Fprintf(&b, "\nthen at half the %.1f RPCs/s answered above:\n", c.DecisionsPerSec/float64(c.Batch))
	}
	load := fmt.Sprintf("closed loop, %d workers", s.Workers)
	if s.Mode == "open" {
		load = fmt.Sprintf("open loop at %.6g/s, at most %d in flight", s.Rate, s.Workers)
	}
	fmt.Fprintf(&b, "%s, %d connections, batch %d\n", load, s.Conns, s.Batch)
	fmt.Fprintf(&b, "measured    %.2fs (after %gs warmup)\n", s.Elapsed, s.Warmup)
	fmt.Fprintf(&b, "requests    %d (%.1f/s)\n", s.Requests, s.RequestsPerSec)
	fmt.Fprintf(&b, "decisions   %d (%.1f/s)\n", s.Decisions, s.DecisionsPerSec)
	fmt.Fprintf(&b, "allowed     %d\n", s.Allowed)
	fmt.Fprintf(&b, "denied      %d\n", s.Denied)
	var failed int64
	var codes []string
	for _, code := range slices.Sorted(maps.Keys(s.Errors)) {
		failed += s.Errors[code]
		codes = append(codes, fmt.Sprintf("%s=%d", code, s.Errors[code]))
	}
	fmt.Fprintf(&b, "errors      %d", failed)
	if len(codes) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(codes, ", "))
	}
	b.WriteString("\n")
	if s.Mode == "open" {
		fmt.Fprintf(&b, "dropped     %d of %d arrivals\n", s.Dropped, s.Arrivals)
	}
	l := s.Latency
	fmt.Fprintf(&b, "latency     p50 %v  p90 %v  p99 %v  p99.9 %v  max %v  (mean %v, per RPC)\n",
		usDur(l.P50), usDur(l.P90), usDur(l.P99), usDur(l.P999), usDur(l.Max), usDur(l.Mean))
	return b.String()
}

// usDur turns microseconds into a readable duration with about three
// significant digits.
func usDur(us float64) time.Duration {
	d := time.Duration(us * 1e3)
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= 100*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d.Round(100 * time.Nanosecond)
}

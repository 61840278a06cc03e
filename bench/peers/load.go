package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// workload is what the client sends: keys drawn uniformly from keys
// distinct values ("spread"), or one key only ("hot"), under limit.
type workload struct {
	name  string
	keys  int
	limit limit
}

// limit is a limit's rate and burst, what a one-key run is judged by.
type limit struct{ perSecond, burst int }

// benchLimit is the one limit of the spread and hot-key workloads.
var benchLimit = limit{perSecond: limitPerSecond, burst: limitBurst}

var (
	spread = workload{name: "spread over 10,000 keys", keys: 10_000, limit: benchLimit}
	hotKey = workload{name: "one hot key", keys: 1, limit: benchLimit}
	// closedLoads run closed-loop against every system.
	closedLoads = []workload{spread, hotKey}
)

// loadConfig is one closed-loop run's shape.
type loadConfig struct {
	workers  int
	warmup   time.Duration // load before measuring, not counted
	duration time.Duration // measured
	timeout  time.Duration // per decision
}

// result is what one run measured. Only decisions sent after the warm-up
// count; window is from the end of the warm-up to the last measured reply,
// so every counted admission was decided inside it.
type result struct {
	limit     limit // the workload's, for the bound
	decisions int64 // answered, allowed or not
	admitted  int64
	errors    int64
	late      int64 // paced only: sent more than lateAfter behind schedule
	window    time.Duration
	latencies []time.Duration // sorted, one per answered decision
	// spans holds each admission's [sent, reply] interval, sorted by
	// sent, on a one-key workload only (it measures one key's bound).
	spans []span
	// use is what the servers spent over the window, when metered.
	use     usage
	metered bool
	// node names the node every decision went to; "" when spread over all.
	node   string
	oneKey bool // the workload has one key: spans are kept, the bound applies
}

// span is when one admitted decision was sent and answered: it was decided
// somewhere in between.
type span struct{ sent, reply time.Time }

// rate is decisions per second of measured time.
func (r result) rate() float64 {
	if r.window <= 0 {
		return 0
	}
	return float64(r.decisions) / r.window.Seconds()
}

// quantile returns the latency of rank ceil(q*n) (0 when nothing answered).
func (r result) quantile(q float64) time.Duration {
	n := len(r.latencies)
	if n == 0 {
		return 0
	}
	i := int(q*float64(n)+0.999999999) - 1
	return r.latencies[min(max(i, 0), n-1)]
}

// bound is the most an exact limiter of the workload's limit may admit on
// one key over the run's window: B + W/T.
func (r result) bound() float64 { return r.limit.boundIn(r.window) }

// maxAdmittedIn returns the most admissions certainly decided within one
// window of length w: the largest number of spans that fit inside
// [t, t+w] for some t. It is a lower bound on the true figure, so a value
// above B + w/T proves over-admission.
func (r result) maxAdmittedIn(w time.Duration) int {
	best := 0
	for i, start := range r.spans { // sorted by sent: later spans start later
		n := 0
		end := start.sent.Add(w)
		for _, s := range r.spans[i:] {
			if s.sent.After(end) {
				break
			}
			if !s.reply.After(end) {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// boundIn is B + w/T, the most an exact limiter admits on one key in any
// window of length w.
func (l limit) boundIn(w time.Duration) float64 {
	return float64(l.burst) + w.Seconds()*float64(l.perSecond)
}

// cpuPerDecision is the servers' CPU time per answered decision over the
// window; 0 when unmetered or nothing was answered.
func (r result) cpuPerDecision() time.Duration {
	if !r.metered || r.decisions == 0 {
		return 0
	}
	return r.use.cpu / time.Duration(r.decisions)
}

// redisPerDecision is Redis commands per answered decision over the
// window; ok is false for a system without Redis (or unmetered).
func (r result) redisPerDecision() (perDecision float64, ok bool) {
	if !r.metered || r.use.cmds == nil || r.decisions == 0 {
		return 0, false
	}
	return float64(total(r.use.cmds)) / float64(r.decisions), true
}

// tally is one worker's private count; merged after the run.
type tally struct {
	decisions, admitted, errors, late int64
	lastReply                         time.Time
	latencies                         []time.Duration
	spans                             []span // admissions, when keepSpans
	keepSpans                         bool
}

// window is told when a run's measured window begins (the warm-up ended)
// and ends (every measured decision is answered). *meter is one.
type window interface {
	begin()
	end()
}

// markWindow calls win.begin at from, in its own goroutine, and returns
// the function to call once the last measured decision is answered: it
// waits for begin and calls win.end, or does nothing if the run ended
// before from. A nil win marks nothing.
func markWindow(from time.Time, win window) (finish func()) {
	if win == nil {
		return func() {}
	}
	begun := make(chan struct{})
	t := time.AfterFunc(time.Until(from), func() {
		win.begin()
		close(begun)
	})
	return func() {
		if t.Stop() {
			return // never began: cut short during the warm-up
		}
		<-begun
		win.end()
	}
}

func keysOf(w workload) []string {
	keys := make([]string, w.keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	return keys
}

// runLoad drives deciders (worker i uses deciders[i%len]) with cfg.workers
// closed-loop workers on w's keys and returns what it measured; win, if
// not nil, is told the measured window's edges. ctx cuts the run short.
func runLoad(ctx context.Context, cfg loadConfig, w workload, deciders []decider, win window) result {
	keys := keysOf(w)
	start := time.Now()
	measureFrom := start.Add(cfg.warmup)
	end := measureFrom.Add(cfg.duration)
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()

	finish := markWindow(measureFrom, win)
	tallies := make([]*tally, cfg.workers)
	var wg sync.WaitGroup
	for i := range tallies {
		t := &tally{keepSpans: w.keys == 1}
		tallies[i] = t
		d := deciders[i%len(deciders)]
		rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), uint64(i)))
		wg.Go(func() {
			for runCtx.Err() == nil {
				key := keys[rng.IntN(len(keys))]
				sent := time.Now()
				callCtx, callCancel := context.WithTimeout(context.Background(), cfg.timeout)
				allowed, err := d.decide(callCtx, key)
				callCancel()
				t.record(sent, measureFrom, allowed, err)
			}
		})
	}
	wg.Wait()
	finish()
	r := merge(tallies, measureFrom)
	r.limit, r.oneKey = w.limit, w.keys == 1
	return r
}

// record counts one decision sent at sent if it was sent after the warm-up.
func (t *tally) record(sent, measureFrom time.Time, allowed bool, err error) {
	if sent.Before(measureFrom) {
		return
	}
	now := time.Now()
	if err != nil {
		t.errors++
		return
	}
	t.decisions++
	if allowed {
		t.admitted++
		if t.keepSpans {
			t.spans = append(t.spans, span{sent: sent, reply: now})
		}
	}
	t.latencies = append(t.latencies, now.Sub(sent))
	if now.After(t.lastReply) {
		t.lastReply = now
	}
}

func merge(tallies []*tally, measureFrom time.Time) result {
	var r result
	last := measureFrom
	for _, t := range tallies {
		r.decisions += t.decisions
		r.admitted += t.admitted
		r.errors += t.errors
		r.late += t.late
		r.latencies = append(r.latencies, t.latencies...)
		r.spans = append(r.spans, t.spans...)
		if t.lastReply.After(last) {
			last = t.lastReply
		}
	}
	slices.Sort(r.latencies)
	slices.SortFunc(r.spans, func(a, b span) int { return a.sent.Compare(b.sent) })
	r.window = last.Sub(measureFrom)
	return r
}

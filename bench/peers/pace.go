package main

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// pacing is an open-loop run's shape: decisions are sent on a fixed
// schedule of rate per second in total, whenever the answers come, with at
// most inFlight outstanding.
type pacing struct {
	rate     float64 // decisions per second, all workers together
	inFlight int     // most decisions outstanding at once
}

// lateAfter is how far behind its slot a paced decision may be sent before
// it counts as late: the client could not keep the schedule (every slot of
// the in-flight bound busy, or the machine did not run it). Slots are
// 0.5 ms apart at 2,000/s, and a sleep on a loaded 2-core machine
// overshoots by about a millisecond routinely: 5 ms is a real stall.
const lateAfter = 5 * time.Millisecond

// pacedLoad is the open-loop workload every system runs (at -paced-rate).
var pacedLoad = workload{name: "paced, spread over 10,000 keys", keys: 10_000, limit: benchLimit}

// dueAt is when decision i (from 0) of a schedule of rate per second that
// starts at start is due.
func dueAt(start time.Time, i int64, rate float64) time.Time {
	return start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
}

// runPaced sends w's decisions on p's schedule for cfg.warmup, then
// cfg.duration, and returns what it measured of the decisions due after
// the warm-up; win, if not nil, is told the measured window's edges.
// Latency runs from when a decision was sent, not from its slot; a
// decision sent more than lateAfter behind its slot, or not sent at all
// because the run ended first, counts as late. ctx cuts the run short.
func runPaced(ctx context.Context, cfg loadConfig, p pacing, w workload, deciders []decider, win window) result {
	keys := keysOf(w)
	start := time.Now()
	measureFrom := start.Add(cfg.warmup)
	end := measureFrom.Add(cfg.duration)
	finish := markWindow(measureFrom, win)

	jobs := make(chan time.Time) // each decision's slot
	tallies := make([]*tally, p.inFlight)
	var wg sync.WaitGroup
	for i := range tallies {
		t := &tally{keepSpans: w.keys == 1}
		tallies[i] = t
		d := deciders[i%len(deciders)]
		rng := rand.New(rand.NewPCG(uint64(start.UnixNano()), uint64(i)))
		wg.Go(func() {
			for due := range jobs {
				key := keys[rng.IntN(len(keys))]
				sent := time.Now()
				callCtx, callCancel := context.WithTimeout(context.Background(), cfg.timeout)
				allowed, err := d.decide(callCtx, key)
				callCancel()
				if due.Before(measureFrom) {
					continue
				}
				if sent.Sub(due) > lateAfter {
					t.late++
				}
				t.record(sent, time.Time{}, allowed, err)
			}
		})
	}
	missed := dispatch(ctx, start, measureFrom, end, p.rate, jobs)
	close(jobs)
	wg.Wait()
	finish()
	r := merge(tallies, measureFrom)
	r.limit, r.oneKey = w.limit, w.keys == 1
	r.late += missed
	return r
}

// dispatch hands each slot of the schedule before end to jobs at its time,
// waiting while every worker is busy, until end or ctx ends. Slots still
// unsent when end has passed are dropped: it returns how many of them were
// due from measureFrom on, which count as late.
func dispatch(ctx context.Context, start, measureFrom, end time.Time, rate float64, jobs chan<- time.Time) (missed int64) {
	for i := int64(0); ; i++ {
		due := dueAt(start, i, rate)
		if !due.Before(end) {
			return missed
		}
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait) // pacing the schedule, at most one slot's gap
		}
		if time.Now().After(end) {
			if !due.Before(measureFrom) {
				missed++
			}
			continue
		}
		select {
		case jobs <- due:
		case <-ctx.Done():
			return missed
		}
	}
}

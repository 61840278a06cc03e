package checker

import (
	"math"
	"time"

	"github.com/weirhq/weir/chaos/history"
)

// Samples is what one key of a limit admitted over a run, for plotting.
type Samples struct {
	Limit, Key  string
	Width, Step time.Duration
	// Times are the sample times in seconds since the header's Start (the
	// earliest time recorded if unset).
	Times []float64
	// Admitted and Fallback are, at each sample time t, the units admitted
	// normally and by a failure policy by the operations lying entirely
	// inside the trailing window [t − Width, t].
	Admitted, Fallback []float64
	// Bound is the plain bound B + Width/T (0 if the limit is unknown).
	Bound float64
}

// Series samples the admissions of key of limit every step over the run, in
// a trailing window of width. A step <= 0 means Width/10.
func Series(h *history.History, limit, key string, width, step time.Duration) Samples {
	s := Samples{Limit: limit, Key: key, Width: width, Step: step}
	if spec, ok := h.Header.Limit(limit); ok && spec.Interval > 0 {
		s.Bound = spec.Bound(width)
	}
	if width <= 0 {
		return s
	}
	if step <= 0 {
		step = max(width/10, 1)
		s.Step = step
	}
	start, end := int64(math.MaxInt64), int64(math.MinInt64)
	var sp []span
	for _, o := range h.Ops {
		if o.Complete < o.Invoke {
			continue
		}
		start, end = min(start, o.Invoke), max(end, o.Complete)
		if o.Outcome != history.Allowed {
			continue
		}
		for _, lk := range o.Limits {
			if lk.Name == limit && lk.Key == key {
				sp = append(sp, span{inv: o.Invoke, comp: o.Complete, cost: max(o.Cost, 1), fb: o.Fallback()})
				break
			}
		}
	}
	for _, e := range h.Events {
		start, end = min(start, e.Time), max(end, e.Time)
	}
	if start > end {
		return s
	}
	if h.Header.Start != 0 {
		start = h.Header.Start
	}
	ks := newKeySpans(sp)
	sw := newSweeper(ks, nil, 1)
	n := int((end-start)/int64(step)) + 1
	s.Times = make([]float64, 0, n)
	s.Admitted = make([]float64, 0, n)
	s.Fallback = make([]float64, 0, n)
	for t := start; ; t += int64(step) {
		sw.advance(t-int64(width), t)
		s.Times = append(s.Times, secondsSince(t, start))
		s.Admitted = append(s.Admitted, float64(sw.nonfb))
		s.Fallback = append(s.Fallback, float64(sw.fb))
		if t >= end {
			break
		}
	}
	return s
}

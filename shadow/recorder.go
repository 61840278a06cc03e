package shadow

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/weirhq/weir/limiter"
)

// Config bounds a Recorder's memory: at most Buckets × MaxLimits × Keys
// tracked keys.
type Config struct {
	// Keys is how many keys each shadow limit tracks per bucket; keys
	// denied more often than 1/Keys of the bucket's would-denies are
	// always among them.
	Keys int
	// Bucket is the time one set of counts covers; --since is rounded out
	// to whole buckets.
	Bucket time.Duration
	// Buckets is how many are kept: the report reaches Buckets × Bucket
	// back.
	Buckets int
	// MaxLimits caps the shadow limits tracked per bucket; would-denies of
	// further limits are counted in Report.Dropped.
	MaxLimits int
}

// DefaultConfig keeps 24 hourly buckets of the top 50 keys for up to 64
// shadow limits.
func DefaultConfig() Config {
	return Config{Keys: 50, Bucket: time.Hour, Buckets: 24, MaxLimits: 64}
}

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error {
	var errs []error
	if c.Keys < 1 || c.Keys > 10_000 {
		errs = append(errs, fmt.Errorf("shadow: keys %d is not in [1, 10000]", c.Keys))
	}
	if c.Bucket < time.Second {
		errs = append(errs, fmt.Errorf("shadow: bucket %s is shorter than a second", c.Bucket))
	}
	if c.Buckets < 1 || c.Buckets > 10_000 {
		errs = append(errs, fmt.Errorf("shadow: buckets %d is not in [1, 10000]", c.Buckets))
	}
	if c.MaxLimits < 1 {
		errs = append(errs, fmt.Errorf("shadow: max limits %d must be positive", c.MaxLimits))
	}
	return errors.Join(errs...)
}

// Recorder counts shadow would-denies per limit and keeps each limit's top
// would-deny keys. Safe for concurrent use; Observe takes one mutex.
type Recorder struct {
	cfg Config
	now func() time.Time
	mu  struct {
		sync.Mutex
		buckets []*bucket // oldest first
		dropped int64
	}
}

type bucket struct {
	start  time.Time
	limits map[string]*limitStats
}

type limitStats struct {
	wouldDeny int64
	top       *topK
}

// New returns a Recorder; now is the clock (nil: time.Now).
func New(cfg Config, now func() time.Time) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Recorder{cfg: cfg, now: now}, nil
}

// Observe records d's shadow limits that would have denied it. Pass it to
// limiter.WithObserver.
func (r *Recorder) Observe(d limiter.Decision) {
	for _, l := range d.Limits {
		if l.Shadow && !l.Allowed {
			r.record(l.Name, l.Key)
		}
	}
}

func (r *Recorder) record(limit, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.currentLocked()
	s := b.limits[limit]
	if s == nil {
		if len(b.limits) >= r.cfg.MaxLimits {
			r.mu.dropped++
			return
		}
		s = &limitStats{top: newTopK(r.cfg.Keys)}
		b.limits[limit] = s
	}
	s.wouldDeny++
	s.top.add(key, 1)
}

// currentLocked returns the bucket for now, starting one (and dropping the
// oldest) when needed.
func (r *Recorder) currentLocked() *bucket {
	start := r.now().Truncate(r.cfg.Bucket)
	if n := len(r.mu.buckets); n > 0 && !r.mu.buckets[n-1].start.Before(start) {
		return r.mu.buckets[n-1]
	}
	b := &bucket{start: start, limits: map[string]*limitStats{}}
	r.mu.buckets = append(r.mu.buckets, b)
	r.pruneLocked(start)
	return b
}

// pruneLocked drops the buckets that started Buckets × Bucket or more
// before current's start.
func (r *Recorder) pruneLocked(current time.Time) {
	oldest := current.Add(-time.Duration(r.cfg.Buckets-1) * r.cfg.Bucket)
	r.mu.buckets = slices.DeleteFunc(r.mu.buckets, func(b *bucket) bool { return b.start.Before(oldest) })
}

// Report is the shadow limits' would-denies over a time range.
type Report struct {
	// From is the start of the oldest bucket included; Until is when the
	// report was made.
	From  time.Time `json:"from"`
	Until time.Time `json:"until"`
	// Nodes names the nodes merged into this report.
	Nodes  []string      `json:"nodes,omitempty"`
	Limits []LimitReport `json:"limits"`
	// Dropped counts would-denies not recorded because MaxLimits shadow
	// limits were already tracked.
	Dropped int64 `json:"dropped,omitempty"`
}

// LimitReport is one shadow limit's part of a Report.
type LimitReport struct {
	Limit     string `json:"limit"`
	WouldDeny int64  `json:"would_deny"`
	// Top lists the most denied keys, most first. Within one bucket a
	// key's true count is in [Count-Err, Count]; summed over buckets or
	// nodes it may also miss the counts of buckets where the key was not
	// among the top.
	Top []Count `json:"top"`
}

// Report returns the would-denies of the buckets that overlap the last
// since (all kept buckets if since <= 0), with up to Keys top keys per
// limit.
func (r *Recorder) Report(since time.Duration) Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.pruneLocked(now.Truncate(r.cfg.Bucket))
	rep := Report{Until: now, From: now, Dropped: r.mu.dropped}
	merged := map[string]*LimitReport{}
	for _, b := range r.mu.buckets {
		if since > 0 && !b.start.Add(r.cfg.Bucket).After(now.Add(-since)) {
			continue
		}
		if b.start.Before(rep.From) {
			rep.From = b.start
		}
		for name, s := range b.limits {
			lr := merged[name]
			if lr == nil {
				lr = &LimitReport{Limit: name}
				merged[name] = lr
			}
			lr.WouldDeny += s.wouldDeny
			lr.Top = append(lr.Top, s.top.top(r.cfg.Keys)...)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(merged)) {
		lr := merged[name]
		lr.Top = mergeCounts(lr.Top, r.cfg.Keys)
		rep.Limits = append(rep.Limits, *lr)
	}
	return rep
}

// Merge combines reports of several nodes (or buckets) into one, keeping
// the top n keys per limit.
func Merge(n int, reports ...Report) Report {
	var out Report
	byLimit := map[string]*LimitReport{}
	for i, rep := range reports {
		if i == 0 || rep.From.Before(out.From) {
			out.From = rep.From
		}
		if rep.Until.After(out.Until) {
			out.Until = rep.Until
		}
		out.Nodes = append(out.Nodes, rep.Nodes...)
		out.Dropped += rep.Dropped
		for _, l := range rep.Limits {
			lr := byLimit[l.Limit]
			if lr == nil {
				lr = &LimitReport{Limit: l.Limit}
				byLimit[l.Limit] = lr
			}
			lr.WouldDeny += l.WouldDeny
			lr.Top = append(lr.Top, l.Top...)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byLimit)) {
		lr := byLimit[name]
		lr.Top = mergeCounts(lr.Top, n)
		out.Limits = append(out.Limits, *lr)
	}
	return out
}

// mergeCounts sums counts and errors per key and keeps the top n.
func mergeCounts(cs []Count, n int) []Count {
	sum := map[string]Count{}
	for _, c := range cs {
		s := sum[c.Key]
		s.Key, s.Count, s.Err = c.Key, s.Count+c.Count, s.Err+c.Err
		sum[c.Key] = s
	}
	out := slices.Collect(maps.Values(sum))
	sortCounts(out)
	if out == nil {
		out = []Count{}
	}
	return out[:min(n, len(out))]
}

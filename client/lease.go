package client

import (
	"context"
	"encoding/binary"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
)

// leaseOwner is the one owner every Ref names: the client refreshes all
// its keys through Target in one batched request, and the node relays
// each key to its real owner.
const leaseOwner = "node"

// LeaseStats are a leasing client's cumulative counts. Safe to read
// concurrently.
type LeaseStats struct {
	// Decisions answered in process from leases (allowed or refused).
	FromLease int64
	// Decide RPCs sent (after a lease could not decide, or for
	// descriptors that are not leasable).
	DecideRPCs int64
	// Hold requests sent on the lease stream (refreshes, probes, lookups).
	LeaseRPCs int64
	// Streams opened (the first, and one per reconnection).
	Streams int64
}

// leaser is a Client's lease side: one lease.Holder per stream to Target,
// the descriptor sets it knows, and the loop that refreshes.
//
// Concurrency: mu guards everything below it; Decide calls take it for a
// lookup and a Spend, and release it while they wait for a refresh
// (awaitLocked). The loop goroutine (run) owns the stream and takes mu to
// build and apply each exchange. up is read without mu on the fast path.
type leaser struct {
	cfg     LeaseConfig
	timeout time.Duration // Config.Timeout
	rpc     weirv1.LeasesClient
	clk     clock.Clock
	born    time.Time
	kick    chan struct{} // buffered 1: exchange now
	quit    chan struct{} // closed by shutdown: return the units and end
	done    chan struct{} // closed when run ends
	stopped sync.Once

	up                                      atomic.Bool // a stream is open and its holder usable
	fromLease, decideRPCs, leaseRPCs, opens atomic.Int64

	mu      sync.Mutex
	h       *lease.Holder // nil while no stream is open
	entries map[string]*entry
	keyDesc map[string]map[string]string // a descriptor set of each leased key
	pending []*entry                     // lookups to send
	version string                       // the policy version of the last answer
	probe   bool                         // a Decide asked for a probe
	wake    chan struct{}                // closed when the exchange in flight ends
	swept   int64
}

// entry is what the client knows of one descriptor set.
type entry struct {
	desc     map[string]string
	state    entryState
	refs     []lease.Ref
	limits   []*weirv1.LeasedLimit
	windows  []time.Duration
	version  string
	seen     int64
	queued   bool
	reported string // why not leasable, as the node said
}

type entryState uint8

const (
	looking  entryState = iota // lookup queued or in flight
	leasable                   // decided from leases
	plain                      // decided over Decide
)

func newLeaser(cfg LeaseConfig, timeout time.Duration, rpc weirv1.LeasesClient) *leaser {
	cfg = cfg.withDefaults()
	return &leaser{
		cfg: cfg, timeout: timeout, rpc: rpc, clk: cfg.Clock, born: cfg.Clock.Now(),
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		entries: make(map[string]*entry), keyDesc: make(map[string]map[string]string),
	}
}

// now is the holder's time base: nanoseconds since the leaser was made.
func (l *leaser) now() int64 { return int64(l.clk.Since(l.born)) }

func (l *leaser) stats() LeaseStats {
	return LeaseStats{FromLease: l.fromLease.Load(), DecideRPCs: l.decideRPCs.Load(), LeaseRPCs: l.leaseRPCs.Load(), Streams: l.opens.Load()}
}

func (l *leaser) kickNow() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// canon appends to dst an encoding of desc that is the same for equal
// maps whatever their order: each name and value length-prefixed, names
// sorted.
func canon(dst []byte, desc map[string]string) []byte {
	var buf [8]string
	names := buf[:0]
	for k := range desc {
		names = append(names, k)
	}
	if len(names) > 1 {
		slices.Sort(names)
	}
	for _, k := range names {
		dst = binary.AppendUvarint(dst, uint64(len(k)))
		dst = append(dst, k...)
		v := desc[k]
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		dst = append(dst, v...)
	}
	return dst
}

// verdict is a lease decision, taken under mu and turned into a response
// after.
type verdict struct {
	e *entry
	// The entry's answer as of the decision, copied under mu: the loop
	// replaces (never modifies) them when a lookup is answered.
	version string
	limits  []*weirv1.LeasedLimit
	windows []time.Duration
	spent   bool
	retry   int64
	// remaining per limit when spent: in rem for up to four limits (no
	// allocation), else in more.
	rem  [4]int64
	more []int64
}

func (v *verdict) remaining(i int) int64 {
	if v.more != nil {
		return v.more[i]
	}
	return v.rem[i]
}

// decide answers the request from leases when it can. It returns the
// entry of the descriptors (nil when unknown) and false when the request
// must go over Decide.
func (l *leaser) decide(ctx context.Context, desc map[string]string, cost int64) (*weirv1.DecideResponse, *entry, bool) {
	if !l.up.Load() {
		return nil, nil, false
	}
	var buf [128]byte
	k := canon(buf[:0], desc)
	l.mu.Lock()
	v, ok := l.decideLocked(ctx, k, desc, cost)
	l.mu.Unlock()
	if !ok {
		return nil, v.e, false
	}
	l.fromLease.Add(1)
	return v.response(), v.e, true
}

func (l *leaser) decideLocked(ctx context.Context, k []byte, desc map[string]string, cost int64) (verdict, bool) {
	e := l.entries[string(k)]
	if e == nil {
		l.lookupLocked(string(k), desc)
		return verdict{}, false
	}
	now := l.now()
	e.seen = now
	if e.state != leasable || l.h == nil {
		return verdict{e: e}, false
	}
	res, err := l.h.Spend(e.refs, cost, now)
	// Two waits at most, as a node's: a refresh in flight may not carry
	// these keys; the probe sent after it does.
	for round := 0; err == nil && res.Outcome == lease.Await; round++ {
		patient := round < 2 && l.awaitLocked(ctx)
		if l.h == nil {
			return verdict{e: e}, false // the stream broke meanwhile
		}
		res, err = l.h.Resume(e.refs, cost, l.now(), patient)
	}
	if err != nil {
		return verdict{e: e}, false // Decide answers bad input as ever
	}
	v := verdict{e: e, version: e.version, limits: e.limits, windows: e.windows}
	switch res.Outcome {
	case lease.Spent:
		v.spent = true
		if len(e.refs) > len(v.rem) {
			v.more = make([]int64, len(e.refs))
		}
		for i, r := range e.refs {
			if v.more != nil {
				v.more[i] = l.h.Units(r.Key, now)
			} else {
				v.rem[i] = l.h.Units(r.Key, now)
			}
		}
		return v, true
	case lease.Refused:
		if res.Probe {
			l.probe = true
			l.kickNow()
		}
		v.retry = res.RetryAfter
		return v, true
	}
	return verdict{e: e}, false
}

// awaitLocked waits, with mu held on entry and on return (released
// meanwhile), for the exchange in flight to end, asking the loop for a
// probe first. It reports false at once when there is nothing to wait for
// or no time to wait: the request then goes over Decide.
func (l *leaser) awaitLocked(ctx context.Context) bool {
	if !l.up.Load() {
		return false
	}
	budget := l.timeout / 2
	if d, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(d)/2)
	}
	budget = min(budget, l.cfg.RefreshTimeout)
	if budget <= 0 {
		return false
	}
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	ch := l.wake
	l.probe = true
	l.kickNow()
	l.mu.Unlock()
	defer l.mu.Lock()
	t := l.clk.NewTimer(budget)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C():
	case <-ctx.Done():
	case <-l.quit:
	}
	return false
}

// lookupLocked remembers desc (as key k) and queues its lookup, unless
// MaxKeys descriptor sets are known already.
func (l *leaser) lookupLocked(k string, desc map[string]string) {
	if len(l.entries) >= l.cfg.MaxKeys {
		return
	}
	e := &entry{desc: maps.Clone(desc), seen: l.now()}
	l.entries[k] = e
	l.queueLocked(e)
}

func (l *leaser) queueLocked(e *entry) {
	if !e.queued {
		e.queued = true
		l.pending = append(l.pending, e)
		l.kickNow()
	}
}

// noteDenials tells the holder about the owner's denials in an answer
// from Decide for a leasable descriptor set, so that a flood on a
// saturated key is refused here until one unit fits.
func (l *leaser) noteDenials(e *entry, resp *weirv1.DecideResponse, cost int64) {
	if e == nil || resp.GetAllowed() || resp.GetTooCostly() || resp.GetFallback() != nil {
		return // only an owner's own denial says when a unit fits
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h == nil || e.state != leasable {
		return
	}
	now := l.now()
	for _, s := range resp.GetLimits() {
		if !s.GetAllowed() && !s.GetTooCostly() && !s.GetShadow() {
			l.h.NoteDenial(s.GetKey(), s.GetRetryAfter().AsDuration().Nanoseconds(), cost, now)
		}
	}
}

// oneLimit is the answer to a request of one limit, the common case, in
// one allocation.
type oneLimit struct {
	resp   weirv1.DecideResponse
	status weirv1.LimitStatus
	window durationpb.Duration
	retry  durationpb.Duration
	list   [1]*weirv1.LimitStatus
}

// response is the DecideResponse of a lease decision, shaped as a node's.
func (v *verdict) response() *weirv1.DecideResponse {
	if len(v.limits) == 1 {
		a := &oneLimit{}
		a.window.Seconds, a.window.Nanos = durationParts(v.windows[0])
		a.list[0] = &a.status
		a.resp.Limits = a.list[:]
		var retry *durationpb.Duration
		if !v.spent {
			a.retry.Seconds, a.retry.Nanos = durationParts(time.Duration(v.retry))
			retry = &a.retry
		}
		v.fill(&a.resp, a.resp.Limits, retry, []*durationpb.Duration{&a.window})
		return &a.resp
	}
	out := &weirv1.DecideResponse{}
	out.Limits = make([]*weirv1.LimitStatus, len(v.limits))
	statuses := make([]weirv1.LimitStatus, len(v.limits)) // one allocation for all
	windows := make([]*durationpb.Duration, len(v.limits))
	for i := range statuses {
		out.Limits[i] = &statuses[i]
		windows[i] = durationpb.New(v.windows[i])
	}
	var retry *durationpb.Duration
	if !v.spent {
		retry = durationpb.New(time.Duration(v.retry))
	}
	v.fill(out, out.Limits, retry, windows)
	return out
}

// fill writes the verdict into out and its limits' statuses.
func (v *verdict) fill(out *weirv1.DecideResponse, statuses []*weirv1.LimitStatus, retry *durationpb.Duration, windows []*durationpb.Duration) {
	out.Allowed, out.Matched, out.FromLease, out.PolicyVersion = v.spent, true, true, v.version
	out.RetryAfter = retry
	out.Remaining = -1
	for i, ll := range v.limits {
		s := statuses[i]
		s.Name, s.Key, s.Allowed, s.Burst, s.Window = ll.GetName(), ll.GetKey(), v.spent, ll.GetBurst(), windows[i]
		if v.spent {
			s.Remaining = v.remaining(i)
			if out.Remaining < 0 || s.Remaining < out.Remaining {
				out.Remaining = s.Remaining
			}
		} else {
			s.RetryAfter = retry
		}
	}
	out.Remaining = max(out.Remaining, 0)
}

// durationParts splits d as durationpb.New does.
func durationParts(d time.Duration) (int64, int32) {
	return int64(d / time.Second), int32(d % time.Second)
}

// refsOf turns a lookup's limits into the holder's refs; false when a
// limit's numbers are unusable (a node this client does not understand).
func refsOf(t *weirv1.LeaseTerms) ([]lease.Ref, []time.Duration, bool) {
	refs := make([]lease.Ref, 0, len(t.GetLimits()))
	windows := make([]time.Duration, 0, len(t.GetLimits()))
	for _, ll := range t.GetLimits() {
		lim := gcra.Limit{Interval: ll.GetInterval().AsDuration().Nanoseconds(), Burst: ll.GetBurst()}
		terms := lease.Terms{Max: ll.GetMaxUnits(), TTL: ll.GetTtl().AsDuration()}
		if lim.Validate() != nil || terms.Validate() != nil || ll.GetKey() == "" {
			return nil, nil, false
		}
		refs = append(refs, lease.Ref{Key: ll.GetKey(), Owner: leaseOwner, Limit: lim, Terms: terms, Label: ll.GetName()})
		windows = append(windows, time.Duration(lim.Interval*lim.Burst))
	}
	return refs, windows, len(refs) > 0
}

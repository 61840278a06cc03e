package regionlink

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/region"
)

// Owners says which node of this region owns a group, and how to reach it
// (forward.Routes implements it). Safe for concurrent use.
type Owners interface {
	// RegionOwner returns the node-to-node address of group's owner, or
	// local when this node owns it ("" and false when the owner is unknown).
	RegionOwner(group string) (addr string, local bool)
}

// Sender carries a report to the node at addr and returns its reply: to a
// node of another region, or to the owner of some of the report's keys
// inside this region (forwarded). Safe for concurrent use. peer.Client
// (and peertest's Network.Reporter) implements it; this package owns the
// interface so that it needs no transport.
type Sender interface {
	Send(ctx context.Context, addr string, r region.Report, forwarded bool) (region.Reply, error)
}

// Deps are what a Link works with.
type Deps struct {
	Owners Owners
	Sender Sender
	// LimitName names the limit that built key ("" if unknown): the label
	// of per-limit metrics and of the grants a home makes for keys other
	// regions report. Decisions never call it: they carry their limits'
	// identities (decide.Def). Safe for concurrent use.
	LimitName func(key string) string
	// Burst returns the burst of the global limit that built key (0 if
	// unknown), from the current policy: as a home, the units of a burst
	// smaller than the number of regions go to the busiest regions
	// (region.Home.SetBursts). Optional; safe for concurrent use.
	Burst func(key string) int64
	// Group returns the group a key belongs to (limitkey.Group).
	Group func(key string) (string, bool)
	// Clock times the reports and grants (as the time elapsed since New,
	// Clock.Since of its reading then: monotonic with clock.Real) and
	// makes Run's ticker. nil means clock.Real().
	Clock clock.Clock
	// FirstSeq numbers this process's reports from FirstSeq+1; 0 means the
	// boot time (Clock.Now) in Unix nanoseconds, above any number an
	// earlier run of this node used.
	FirstSeq uint64
}

// Link shares the budgets of scope: global limits between this node's
// region and the others (package region): it enforces this region's share
// of the global keys this node owns (Enforce), reports their demand to
// their home regions every interval (Run), and, as a home, answers the
// reports of other regions (Handle). Safe for concurrent use.
//
// Concurrency: the Member (this node's shares) and the Home (the ledger of
// the keys homed in this region that this node owns) each sit behind their
// own mutex; the keys' enforcement state is striped by group, and a
// decision holds its group's stripe from Enforce until release, reading
// the share under it, so a share change and a decision of the same key
// never interleave. Lock order: a stripe, then the Member; the Home's
// mutex is never held with either.
type Link struct {
	cfg     Config
	deps    Deps
	clk     clock.Clock // deps.Clock, or clock.Real()
	start   time.Time   // clk's reading at New: mono counts from it
	logger  *slog.Logger
	metrics *metrics
	window  int // demand buckets over the last second
	seed    maphash.Seed
	stripes [64]stripe

	memberMu sync.Mutex
	member   *region.Member
	homeMu   sync.Mutex
	home     *region.Home
}

type stripe struct {
	mu   sync.Mutex
	keys map[string]*keyState
}

// keyState is what this node remembers of one global key it decides.
type keyState struct {
	limit    string     // label: the policy limit's name
	global   gcra.Limit // the key's whole limit, as last decided
	enforced gcra.Limit // the limit its TAT was last decided at
	valid    bool       // enforced is a usable limit
	epoch    uint64     // the owner memory's epoch at that decision
	offered  int64      // units offered this interval
	hist     []int64    // units offered in each of the last intervals
	pos      int
	used     int64 // mono of the last decision
}

// New returns a Link. It starts nothing: call Run for the reports.
func New(cfg Config, deps Deps, logger *slog.Logger, reg prometheus.Registerer) (*Link, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Owners == nil || deps.Sender == nil || deps.LimitName == nil || deps.Group == nil {
		return nil, errors.New("regionlink: owners, sender, limit name and group are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	clk := deps.Clock
	if clk == nil {
		clk = clock.Real()
	}
	start := clk.Now()
	if deps.FirstSeq == 0 {
		deps.FirstSeq = uint64(start.UnixNano())
	}
	now := int64(0) // mono at start
	reporter := fmt.Sprintf("%s#%d", cfg.Node, deps.FirstSeq)
	member, err := region.NewMember(cfg.Shares, cfg.Region, reporter, deps.FirstSeq)
	if err != nil {
		return nil, err
	}
	home, err := region.NewHome(cfg.Shares, cfg.Region, now)
	if err != nil {
		return nil, err
	}
	if deps.Burst != nil {
		home.SetBursts(deps.Burst)
	}
	l := &Link{cfg: cfg, deps: deps, clk: clk, start: start, logger: logger, member: member, home: home, seed: maphash.MakeSeed(),
		window: max(1, int((time.Second+cfg.Shares.Interval-1)/cfg.Shares.Interval))}
	for i := range l.stripes {
		l.stripes[i].keys = make(map[string]*keyState)
	}
	if l.metrics, err = newMetrics(l, reg); err != nil {
		return nil, err
	}
	return l, nil
}

// StrictLimits returns a copy of limits with every global key's limit cut
// to a fixed equal part of it (1/len(regions)): a strict key is decided by
// its region's Redis, where its TAT cannot be rescaled as a share moves,
// so it takes no part in the rebalancing. ok is false when that part
// admits nothing (no unit of the burst by the unit rule, region.Config.Limit:
// a burst below the number of regions): deny the request. defs are the
// keys' limits' identities (decide.Request.Defs): a key is global when its
// Def says so.
func (l *Link) StrictLimits(keys []string, defs []*decide.Def, limits []gcra.Limit) (out []gcra.Limit, ok bool) {
	out = slices.Clone(limits)
	for i := range keys {
		d := defAt(defs, i)
		if d == nil || !d.Global {
			continue
		}
		lim, valid := l.Guaranteed(limits[i], true)
		if !valid {
			l.metrics.empty.WithLabelValues(d.Name).Inc()
			return nil, false
		}
		out[i] = lim
	}
	return out, true
}

// Guaranteed returns the part of a global limit whole that this region
// holds whatever the other regions and the key's home do: its floor for a
// fast limit (region.Config.Floor, granted to every region without
// asking), its fixed part for a strict one (see StrictLimits). The
// regions' guaranteed parts sum to at most whole, so a failure policy that
// falls back to them (limiter.WithFallbackPart, split over the region's
// nodes) keeps every region together within the limit. ok is false when
// the part admits nothing (it holds no unit, region.Config.Limit). Safe for
// concurrent use; it takes no lock.
func (l *Link) Guaranteed(whole gcra.Limit, strict bool) (part gcra.Limit, ok bool) {
	if strict {
		return l.cfg.Shares.Limit(region.Whole/region.Share(len(l.cfg.Shares.Regions)), whole)
	}
	return l.cfg.Shares.Limit(l.cfg.Shares.Floor, whole)
}

// Enforce returns the limits to decide keys at, now, for a decision of
// cost on group: limits[i] for a key whose limit is not global, this
// region's current share of it (region.Config.Limit) for a global one. For
// a global key whose enforced limit changed since its TAT was last decided
// it calls rescale(key, f): the caller must replace the key's TAT t with
// f(t) (region.Rescale, which keeps the key's level, never resets it). A
// key this node has not decided since the owner memory's epoch last moved
// (a hand-off, a reload) is taken to have been decided at this region's
// floor, which never overstates its level whatever limit wrote its TAT.
//
// ok is false, and nothing must be decided, when a global key's share
// admits nothing (it holds no unit of the burst). Call
// release once the decision is stored, whatever ok is: until then the
// group's stripe is held. now is on the cluster's time base, like the TATs;
// the offered cost counts towards the keys' demand. defs are the keys'
// limits' identities (decide.Request.Defs): a key is global when its Def
// says so, and no key is parsed.
func (l *Link) Enforce(epoch uint64, group string, keys []string, defs []*decide.Def, limits []gcra.Limit, cost, now int64,
	rescale func(key string, f func(tat int64) int64)) (out []gcra.Limit, ok bool, release func()) {
	var names []string // a global key's limit name; "" for the others
	for i := range keys {
		if d := defAt(defs, i); d != nil && d.Global {
			if names == nil {
				names = make([]string, len(keys))
			}
			names[i] = d.Name
		}
	}
	if names == nil { // nothing global: the common case costs no lock
		return limits, true, func() {}
	}
	st := &l.stripes[maphash.String(l.seed, group)%uint64(len(l.stripes))]
	st.mu.Lock()
	// The shares are read under the stripe, so that of two decisions of a
	// key the later one never enforces an older share (lock order: stripe,
	// then member).
	mono := l.mono()
	shares := make([]region.Share, len(keys))
	l.memberMu.Lock()
	for i, k := range keys {
		if names[i] != "" {
			shares[i] = l.member.Share(k, mono)
		}
	}
	l.memberMu.Unlock()
	out, ok = make([]gcra.Limit, len(limits)), true
	copy(out, limits)
	for i, k := range keys {
		if names[i] == "" {
			continue
		}
		ks := st.keys[k]
		if ks == nil {
			ks = &keyState{hist: make([]int64, l.window)}
			st.keys[k] = ks
		}
		ks.limit = names[i]
		ks.offered += cost // demand: what callers ask for, admitted or not
		ks.used = mono
		if ks.epoch != epoch || ks.global != limits[i] {
			ks.valid = false // enforced no longer says how the TAT was written
		}
		// The whole limit is known from the first request on, so a share
		// that admits nothing still reports its demand and grows from it.
		ks.global, ks.epoch = limits[i], epoch
		to, valid := l.cfg.Shares.Limit(shares[i], limits[i])
		if !valid {
			// The TAT is left as it was, but the region no longer owns the
			// rate that refills it: when the key holds a unit again its
			// bucket starts empty, not refilled over the time it had none.
			l.metrics.empty.WithLabelValues(names[i]).Inc()
			ks.valid, ok = false, false
			continue
		}
		out[i] = to
		from, fromOK := ks.enforced, ks.valid
		if !fromOK {
			from, fromOK = l.cfg.Shares.Limit(l.cfg.Shares.Floor, limits[i])
		}
		switch {
		case !fromOK:
			rescale(k, func(int64) int64 { return now + to.Span() }) // nothing known: empty
		case from != to:
			rescale(k, func(tat int64) int64 { return region.Rescale(tat, now, from, to) })
		}
		ks.enforced, ks.valid = to, true
	}
	return out, ok, st.mu.Unlock
}

// defAt is defs[i], nil beyond defs.
func defAt(defs []*decide.Def, i int) *decide.Def {
	if i < len(defs) {
		return defs[i]
	}
	return nil
}

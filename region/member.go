package region

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Member is a region's side of the rebalancing, for the keys one process
// enforces: it reports their demand to their homes, applies the homes'
// grants, and says which share of each key to enforce now.
//
// A grant counts from the moment the report it answers was sent, on this
// process's clock, so the process stops using a share no later (up to the
// clock drift Config.Grace covers) than the home, counting from the later
// moment it granted, releases it. Without a live grant a key is enforced at
// the floor: a region cut off from a key's home keeps its share until the
// grant expires, then falls back to the floor, which the home never grants
// to anyone else.
//
// A Member does no I/O and reads no clock: times are integer nanoseconds
// on this process's clock, passed in. It is not safe for concurrent use.
type Member struct {
	cfg              Config
	region, reporter string
	seq              uint64
	sent             map[uint64]int64 // seq → sent at, reports awaiting a reply
	keys             map[string]*grantState
}

type grantState struct {
	share Share
	until int64  // sent at + TTL
	seq   uint64 // newest grant applied (its report's Seq)
}

// NewMember returns the side of region that process reporter runs.
// Reports are numbered from firstSeq + 1. A process that restarts under the
// same reporter name must start above every number it used before (for
// example at its boot time in nanoseconds), or homes may take its new
// acknowledgements for old ones and keep its old grants reserved until they
// expire (which costs capacity, not safety). It returns an error if cfg is
// invalid, region is not one of its regions or reporter is empty.
func NewMember(cfg Config, region, reporter string, firstSeq uint64) (*Member, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case !cfg.hasRegion(region):
		return nil, fmt.Errorf("%w: region %q is not in %v", ErrInvalidConfig, region, cfg.Regions)
	case reporter == "":
		return nil, fmt.Errorf("%w: reporter name is required", ErrInvalidConfig)
	}
	cfg.Regions = slices.Clone(cfg.Regions)
	return &Member{cfg: cfg, region: region, reporter: reporter, seq: firstSeq,
		sent: make(map[uint64]int64), keys: make(map[string]*grantState)}, nil
}

// Reports returns this round's reports at now, one per home region with
// anything to say, sorted by home: every key with positive demand
// (demand[key], a fraction of the global rate as in Demand.Demand) and
// every key holding a live grant (reported at its demand, 0 if absent, so
// its home can shrink it). Send each to its home, the one for this region
// included, every Config.Interval. It returns an error, and changes
// nothing, if a demand is negative or not finite.
func (m *Member) Reports(now int64, demand map[string]float64) ([]Report, error) {
	for k, d := range demand {
		if math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
			return nil, fmt.Errorf("%w: key %q: demand %v", ErrInvalidReport, k, d)
		}
	}
	byHome := make(map[string][]Demand)
	add := func(k string) {
		home, _ := HomeOf(k, m.cfg.Regions)
		var ack uint64
		if g := m.keys[k]; g != nil {
			ack = g.seq
		}
		byHome[home] = append(byHome[home], Demand{Key: k, Demand: demand[k], Ack: ack})
	}
	for k, d := range demand {
		if d > 0 {
			add(k)
		}
	}
	for k, g := range m.keys {
		switch {
		case g.until > now && !(demand[k] > 0):
			add(k)
		case g.until <= now && now-g.until > m.cfg.ttl():
			delete(m.keys, k) // long expired: nothing to acknowledge
		}
	}
	for seq, at := range m.sent {
		if now-at >= m.cfg.ttl() {
			delete(m.sent, seq) // a reply now would grant nothing
		}
	}
	homes := make([]string, 0, len(byHome))
	for h := range byHome {
		homes = append(homes, h)
	}
	slices.Sort(homes)
	out := make([]Report, 0, len(homes))
	for _, h := range homes {
		items := byHome[h]
		slices.SortFunc(items, func(a, b Demand) int { return cmp.Compare(a.Key, b.Key) })
		m.seq++
		m.sent[m.seq] = now
		out = append(out, Report{From: m.region, Reporter: m.reporter, Home: h, Seq: m.seq, Items: items})
	}
	return out, nil
}

// Apply applies a home's reply at now and returns how many grants it took
// up. A reply to a report this process did not send, or sent more than a
// TTL ago, or already answered, is ignored (late, duplicated, or meant for
// a previous incarnation); so is a grant older than one already applied
// for its key, or already expired. It returns an error wrapping
// ErrInvalidReport, and changes nothing, if the reply is addressed to
// another region or process.
func (m *Member) Apply(now int64, r Reply) (int, error) {
	grants, at, err := m.Accepts(now, r)
	if err != nil || at < 0 {
		return 0, err
	}
	delete(m.sent, r.Seq)
	for _, g := range grants {
		st := m.keys[g.Key]
		if st == nil {
			st = &grantState{}
			m.keys[g.Key] = st
		}
		st.share, st.until, st.seq = g.Share, at+g.TTL, r.Seq
	}
	return len(grants), nil
}

// Accepts returns the grants of r that Apply would take up at now, each
// with its TTL cut to the configured one, and when the report r answers
// was sent (-1 if r would be ignored), without changing anything. It
// returns the error Apply would.
func (m *Member) Accepts(now int64, r Reply) (grants []Grant, sentAt int64, err error) {
	if r.To != m.region || r.Reporter != m.reporter {
		return nil, -1, fmt.Errorf("%w: reply for %s/%s reached %s/%s", ErrInvalidReport, r.To, r.Reporter, m.region, m.reporter)
	}
	at, ok := m.sent[r.Seq]
	if !ok {
		return nil, -1, nil
	}
	for _, g := range r.Grants {
		g.TTL = min(g.TTL, m.cfg.ttl())
		st := m.keys[g.Key]
		if at+g.TTL <= now || (st != nil && st.seq >= r.Seq) || g.Share < 0 || g.Share > Whole {
			continue
		}
		grants = append(grants, g)
	}
	return grants, at, nil
}

// Share returns the share of key to enforce at now: the newest applied
// grant while it lasts, else the floor.
func (m *Member) Share(key string, now int64) Share {
	if g := m.keys[key]; g != nil && g.until > now {
		return g.share
	}
	return m.cfg.Floor
}

// AtFloor reports whether key is enforced at the floor at now because it
// holds no live grant (never granted, or cut off until its grant expired).
func (m *Member) AtFloor(key string, now int64) bool {
	g := m.keys[key]
	return g == nil || g.until <= now
}

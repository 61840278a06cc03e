package lease

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/weirhq/weir/gcra"
)

// HolderConfig tunes a Holder.
type HolderConfig struct {
	// Name identifies this node to owners (Request.Peer). Make it change
	// when the node restarts: name plus boot incarnation.
	Name string
	// HalfLife is the half-life of the demand estimate (an exponentially
	// weighted rate). Shorter follows bursts faster and sizes leases more
	// erratically.
	HalfLife time.Duration
	// RefreshWhenLeft refreshes a lease when at most this fraction of its
	// TTL is left, in (0, 1). Larger refreshes earlier: more refreshes,
	// less risk of running dry while a refresh is in flight.
	RefreshWhenLeft float64
	// MinUnits is the least demand over one TTL, in units, for which a key
	// asks for a lease. Quieter keys are forwarded to their owner.
	MinUnits float64
	// IdleAfter forgets a key that holds nothing and saw no request for
	// this long.
	IdleAfter time.Duration
}

// DefaultHolderConfig returns a 1s demand half-life, refresh with 40% of
// the TTL left, leases for keys expecting at least one unit per TTL, and
// idle keys forgotten after 10s. Name must still be set.
func DefaultHolderConfig() HolderConfig {
	return HolderConfig{HalfLife: time.Second, RefreshWhenLeft: 0.4, MinUnits: 1, IdleAfter: 10 * time.Second}
}

// Validate reports whether c is usable. It changes nothing.
func (c HolderConfig) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("lease: holder name is required")
	case c.HalfLife < time.Microsecond || c.IdleAfter <= 0:
		return fmt.Errorf("lease: half-life %s and idle-after %s must be positive", c.HalfLife, c.IdleAfter)
	case !(c.RefreshWhenLeft > 0 && c.RefreshWhenLeft < 1):
		return fmt.Errorf("lease: refresh-when-left %v must be in (0, 1)", c.RefreshWhenLeft)
	case !(c.MinUnits > 0) || math.IsInf(c.MinUnits, 0):
		return fmt.Errorf("lease: min units %v must be positive", c.MinUnits)
	}
	return nil
}

// Ref names one leasable key of a request and what a lease on it needs.
type Ref struct {
	Group, Key string
	// Owner is the node that owns Group now; refreshes go there.
	Owner string
	Limit gcra.Limit
	Terms Terms
	// Label names the policy limit, only to label counts.
	Label string
}

// SpendOutcome says how a Holder answered a Spend.
type SpendOutcome uint8

const (
	// Forward: decide at the owner as without leases.
	Forward SpendOutcome = iota
	// Spent: admitted from leases; every key was charged.
	Spent
	// Refused: denied locally from the owner's last denial; RetryAfter set.
	Refused
	// Await: a key that cannot pay has a refresh in flight or due (its
	// lease was given back in a refresh, used up while demand remains, or
	// the key is saturated and its owner's denial has passed). The caller
	// waits for that refresh (Probe sends one if none is in flight) and then
	// calls Resume, instead of forwarding: one refresh answers every request
	// that waits for it.
	Await
)

// Verdict is the answer to a Spend.
type Verdict struct {
	Outcome SpendOutcome
	// RetryAfter, when Refused, is in nanoseconds and never earlier than
	// the owner's own answer implied.
	RetryAfter int64
	// Probe, when Refused, asks the caller to send Probe to the keys'
	// owner now: a saturated key's denial ends within about one round trip
	// to the owner, so the next answer arrives about when it ends and the
	// requests after it need not wait (see Holder.Probe).
	Probe bool
}

// HolderStats are a Holder's cumulative counts for one limit, for metrics.
// A request counts once for each of its limits.
type HolderStats struct {
	Spends, Refusals, Forwards int64
	// Waits counts requests that Spend answered Await (each is counted
	// again by its final outcome).
	Waits int64
	// Unit counts: received in grants, spent, given back in refreshes,
	// left unspent at expiry (stranded), and given back in refreshes
	// that failed (stranded at the owner instead).
	ReceivedUnits, SpentUnits, ReturnedUnits, StrandedUnits, LostUnits int64
}

// Holder is a peer's side of leasing: the units it holds per key, its
// demand per key, and the owners' last denials. All times are the peer's
// own monotonic nanoseconds; nothing here is compared with an owner's clock
// except through durations.
//
// A Holder does no I/O and reads no clock. It is not safe for concurrent
// use: the caller serialises calls (one mutex, or one Holder per shard of
// keys).
type Holder struct {
	cfg      HolderConfig
	keys     map[string]*held
	seq      uint64
	inflight map[string]*pending     // by owner
	failing  map[string]bool         // by owner: its last refresh got no valid reply
	rtt      map[string]*roundTrips  // by owner: its latest refresh round trips
	stats    map[string]*HolderStats // by Ref.Label
	ignored  int64
}

type held struct {
	ref     Ref
	units   int64
	grantor string
	lease   uint64 // 0 when holding no lease
	expires int64
	// nextAt and spacing: under a scheduled grant the next unspent unit
	// may be spent from nextAt, each later one spacing after the one
	// before (Answer.Start, Answer.Spacing); spacing 0 is an ordinary
	// grant, all of it spendable at once.
	nextAt, spacing int64
	rate            float64 // demand in units per second at seen
	seen            int64
	deniedUntil     int64 // the owner's last denial: one unit fits from then
	quietUntil      int64 // after capped or busy: do not ask before
	// saturated: the owner's last answer on the key was a denial, or a
	// grant that left it at its edge. Requests past deniedUntil then await
	// a refresh rather than forward one by one.
	saturated bool
	// refreshing: a refresh in flight carries the key (its units went back
	// when it was sent); requests await its answer rather than forward.
	refreshing bool
}

type pending struct {
	seq      uint64
	sent     int64
	keys     []string
	returned map[string]int64 // units given back, by label
}

// NewHolder returns a Holder holding nothing, or an error if cfg is invalid.
func NewHolder(cfg HolderConfig) (*Holder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Holder{cfg: cfg, keys: make(map[string]*held), inflight: make(map[string]*pending), failing: make(map[string]bool),
		rtt: make(map[string]*roundTrips), stats: make(map[string]*HolderStats)}, nil
}

// Stats returns the cumulative counts per limit label (Ref.Label).
func (h *Holder) Stats() map[string]HolderStats {
	out := make(map[string]HolderStats, len(h.stats))
	for l, s := range h.stats {
		out[l] = *s
	}
	return out
}

// Len is how many keys the holder tracks: held, wanted or refused, not
// yet forgotten by Sweep.
func (h *Holder) Len() int { return len(h.keys) }

// IgnoredReplies counts replies that did not answer the latest refresh to
// their owner; their grants strand at the owner.
func (h *Holder) IgnoredReplies() int64 { return h.ignored }

func (h *Holder) stat(label string) *HolderStats {
	s := h.stats[label]
	if s == nil {
		s = &HolderStats{}
		h.stats[label] = s
	}
	return s
}

// Units returns the units held on key at now (0 once its lease expired).
func (h *Holder) Units(key string, now int64) int64 {
	if k := h.keys[key]; k != nil && now < k.expires {
		return k.units
	}
	return 0
}

// Ready returns the units held on key that may be spent at now: all of
// Units under an ordinary grant, only those whose time has come under a
// scheduled one.
func (h *Holder) Ready(key string, now int64) int64 {
	k := h.keys[key]
	if k == nil || now >= k.expires || k.lease == 0 {
		return 0
	}
	if k.spacing == 0 {
		return k.units
	}
	if now < k.nextAt {
		return 0
	}
	return min(k.units, (now-k.nextAt)/k.spacing+1)
}

// Demand returns the demand estimate for key at now, in units per second.
func (h *Holder) Demand(key string, now int64) float64 {
	if k := h.keys[key]; k != nil {
		return h.demand(k, now)
	}
	return 0
}

func (h *Holder) demand(k *held, now int64) float64 {
	dt := max(0, now-k.seen)
	return k.rate * math.Exp2(-float64(dt)/float64(h.cfg.HalfLife.Nanoseconds()))
}

// Spend decides one request of cost from leases at now. Every ref's demand
// is recorded. If every key holds at least cost units under a live lease,
// all are charged and the verdict is Spent; if every key either could pay or
// is under the owner's last denial, none is charged and the verdict is
// Refused with the largest retry-after. If, besides those, some key has a
// refresh in flight or due (see awaits), the verdict is Await: nothing is charged, and the caller waits for
// that refresh and calls Resume. Otherwise nothing is charged and the
// caller forwards the request to the owner (then tells NoteDenial about any
// denial). Bad input gets an error wrapping ErrInvalidRequest and changes
// nothing.
func (h *Holder) Spend(refs []Ref, cost, now int64) (Verdict, error) {
	return h.spend(refs, cost, now, true, true)
}

// Resume decides again a request whose Spend answered Await, once the
// refresh it waited for was answered or given up (or the caller's patience
// ran out), without counting its demand twice. With mayWait false it never
// answers Await: Forward instead.
func (h *Holder) Resume(refs []Ref, cost, now int64, mayWait bool) (Verdict, error) {
	return h.spend(refs, cost, now, false, mayWait)
}

func (h *Holder) spend(refs []Ref, cost, now int64, demand, mayWait bool) (Verdict, error) {
	if err := checkSpend(refs, cost); err != nil {
		return Verdict{}, err
	}
	var buf [8]*held // a request's limits, without allocating
	ks := buf[:0]
	for _, r := range refs {
		ks = append(ks, h.track(r, cost, now, demand))
	}
	payable, await := true, false
	var retry int64
	for _, k := range ks {
		at, held := k.payableAt(cost)
		if held && at <= now {
			continue
		}
		payable = false
		switch {
		case held:
			// A scheduled unit whose time has not come: refused until
			// then, exactly (the owner has no unit before it either).
			retry = max(retry, at-now)
		case cost > k.ref.Limit.Burst:
			return h.forward(ks), nil // the owner says so, distinctly
		case now < k.deniedUntil:
			retry = max(retry, k.deniedUntil-now+(cost-1)*k.ref.Limit.Interval)
		case mayWait && h.awaits(k, now):
			await = true
		default:
			return h.forward(ks), nil
		}
	}
	if await {
		for _, k := range ks {
			if demand { // a first Spend; a Resume's wait was counted
				h.stat(k.ref.Label).Waits++
			}
		}
		return Verdict{Outcome: Await}, nil
	}
	if payable {
		for _, k := range ks {
			k.units -= cost
			k.nextAt += cost * k.spacing
			st := h.stat(k.ref.Label)
			st.Spends++
			st.SpentUnits += cost
		}
		return Verdict{Outcome: Spent}, nil
	}
	probe := false
	for _, k := range ks {
		h.stat(k.ref.Label).Refusals++
		_, held := k.payableAt(cost)
		probe = probe || (!held && h.inflight[k.ref.Owner] == nil && h.due(k, now))
	}
	return Verdict{Outcome: Refused, RetryAfter: retry, Probe: probe}, nil
}

// payableAt reports whether k's live lease holds cost units that it can
// spend before it ends (held), and from when (at): at once for an ordinary
// grant, from the cost-th next unit's time under a scheduled one. k's lease
// was written off already if it ended (track).
func (k *held) payableAt(cost int64) (at int64, held bool) {
	if k.units < cost || k.lease == 0 {
		return 0, false
	}
	at = k.nextAt + (cost-1)*k.spacing
	return at, at < k.expires
}

// forward counts a forward for every key of a request.
func (h *Holder) forward(ks []*held) Verdict {
	for _, k := range ks {
		h.stat(k.ref.Label).Forwards++
	}
	return Verdict{Outcome: Forward}
}

// awaits reports whether a request on k, which cannot pay and is past the
// owner's last denial, should wait for a refresh instead of forwarding: a
// refresh in flight carries k, or k wants a lease and one is due (the
// caller then sends a probe), or k is saturated and a refresh to its owner
// is in flight. One refresh then answers every request that waits for it,
// where forwarding would cost a hop per request while the key runs dry.
// Never while the owner's last refresh went unanswered: a slow or
// unreachable owner is the forward path's to handle (breaker, deadline,
// failure policy), not a wait per request for one more refresh.
func (h *Holder) awaits(k *held, now int64) bool {
	if h.failing[k.ref.Owner] {
		return false
	}
	return k.refreshing || h.due(k, now) || (k.saturated && h.inflight[k.ref.Owner] != nil)
}

// checkSpend returns nil for a well-formed spend, else the error that says
// what is wrong with it. Every request runs it, deep in a server's stack:
// the passing path stays small, and the messages are built apart
// (spendError), so that a leased decision needs no more stack than one at
// the owner (a goroutine that outgrows its stack copies it).
func checkSpend(refs []Ref, cost int64) error {
	if cost <= 0 || len(refs) == 0 {
		return spendError(refs, cost)
	}
	for i := range refs {
		r := &refs[i]
		if r.Key == "" || r.Owner == "" || r.Limit.Validate() != nil || r.Terms.Validate() != nil || hasKey(refs[:i], r.Key) {
			return spendError(refs, cost)
		}
	}
	return nil
}

// spendError is checkSpend's failing path: the first thing wrong with the
// spend, described.
//
//go:noinline
func spendError(refs []Ref, cost int64) error {
	if cost <= 0 || len(refs) == 0 {
		return fmt.Errorf("%w: spend of %d units on %d keys", ErrInvalidRequest, cost, len(refs))
	}
	for i, r := range refs {
		if r.Key == "" || r.Owner == "" {
			return fmt.Errorf("%w: ref %d needs a key and an owner", ErrInvalidRequest, i)
		}
		if hasKey(refs[:i], r.Key) {
			return fmt.Errorf("%w: key %q appears twice", ErrInvalidRequest, r.Key)
		}
		if err := r.Limit.Validate(); err != nil {
			return fmt.Errorf("ref %d: %w", i, err)
		}
		if err := r.Terms.Validate(); err != nil {
			return fmt.Errorf("ref %d: %w", i, err)
		}
	}
	return nil
}

// hasKey reports whether one of refs is on key.
func hasKey(refs []Ref, key string) bool {
	for i := range refs {
		if refs[i].Key == key {
			return true
		}
	}
	return false
}

// track returns r's record, creating or updating it, with cost added to
// its demand if demand is set and an expired lease written off.
func (h *Holder) track(r Ref, cost, now int64, demand bool) *held {
	k := h.keys[r.Key]
	if k == nil {
		k = &held{seen: now}
		h.keys[r.Key] = k
	}
	// The group may be cut from a request's decode buffer: keep a copy of
	// its own (once per key, not per call) rather than pin that buffer.
	if k.ref.Group == r.Group {
		r.Group = k.ref.Group
	} else {
		r.Group = strings.Clone(r.Group)
	}
	k.ref = r
	if demand {
		k.rate = h.demand(k, now) + float64(cost)*math.Ln2/h.cfg.HalfLife.Seconds()
		k.seen = max(k.seen, now)
	}
	h.expire(k, now)
	return k
}

// expire writes off k's lease if it ended at or before now.
func (h *Holder) expire(k *held, now int64) {
	if k.lease != 0 && now >= k.expires {
		h.stat(k.ref.Label).StrandedUnits += k.units
		k.units, k.lease = 0, 0
	}
}

// NoteDenial remembers the owner's denial of a forwarded request of cost on
// key, answered at now (when the answer arrived, so never before the owner
// decided) with retryAfter nanoseconds. Until one unit would fit, Spend
// refuses requests on key locally. The last answer wins: a denial after
// which one unit already fits clears the memory. Unknown keys are ignored.
func (h *Holder) NoteDenial(key string, retryAfter, cost, now int64) {
	k := h.keys[key]
	if k == nil || retryAfter <= 0 || cost <= 0 {
		return
	}
	k.deniedUntil = now + retryAfter - (cost-1)*k.ref.Limit.Interval
	k.saturated = true
}

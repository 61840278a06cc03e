package rested

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/clock"
)

// Config tunes a Rule.
type Config struct {
	// Margin is how much later than this node the previous owner of a
	// group may learn that the group moved here (gossip propagation, a
	// member's own ring rebuild): a key is rested only once its span plus
	// Margin has passed since this node's ownership began. Longer costs
	// one load per key touched within Margin of a ring change, nothing
	// after. If gossip reaches the previous owner later than Margin, that
	// owner's decisions after Margin may not be seen here: at most one
	// burst per key, the cost of the race every hand-off already has
	// (docs/architecture.md, "The load rule"). A crashed or leaving owner
	// needs none: it stopped deciding before this node took over.
	// It must also cover the lease grace (lease.GrantorConfig.Grace, 5ms
	// by default), which the caller does not add to a span, and the age of
	// a forwarded request's stamp (decided at its receiving node's Now:
	// milliseconds, within the forward timeout).
	Margin time.Duration
	// MaxSwept bounds the keys remembered as swept, so that their next
	// decision needs no load even within a key's span of an ownership
	// change: about 16 bytes each. 0 remembers none.
	MaxSwept int
}

// MinMargin is the smallest Config.Margin: below it, a ring change that
// reaches the previous owner a little later than this node would let that
// owner's last decisions go unseen.
const MinMargin = 100 * time.Millisecond

// DefaultConfig returns a margin of 2 s, several gossip rounds of
// memberlist's LAN settings, and room for about a million swept keys.
func DefaultConfig() Config { return Config{Margin: 2 * time.Second, MaxSwept: 1 << 20} }

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.Margin < MinMargin:
		return fmt.Errorf("rested: margin %s below the minimum %s", c.Margin, MinMargin)
	case c.MaxSwept < 0:
		return fmt.Errorf("rested: max swept %d is negative", c.MaxSwept)
	}
	return nil
}

// Rule decides whether a key absent from owner memory is rested. Safe for
// concurrent use: the current stretch of ownership is one atomic pointer,
// replaced (never changed) on Restart and on a new epoch.
type Rule struct {
	clk    clock.Clock
	born   time.Time
	margin int64     // nanoseconds
	swept  *sweptSet // nil with MaxSwept 0
	owned  atomic.Pointer[stretch]
	// widest is the longest span Rested was asked about: Likely's guess.
	widest atomic.Int64
}

// stretch is one stretch of unchanged ownership: it began since
// nanoseconds after born (on clk), at memory epoch epoch; notYet before the
// first Restart.
type stretch struct {
	epoch uint64
	since int64
}

const notYet = math.MaxInt64

// New returns a Rule on clk, the owner's clock (it measures how long
// ownership has lasted; only durations are read). Ownership begins at the
// first Restart, when the owner's first ring is installed: until then the
// ring is empty, and a node that has not joined its cluster yet would own
// every group while the others decide them.
func New(cfg Config, clk clock.Clock) (*Rule, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if clk == nil {
		return nil, errors.New("rested: clock is required")
	}
	r := &Rule{clk: clk, born: clk.Now(), margin: cfg.Margin.Nanoseconds()}
	if cfg.MaxSwept > 0 {
		r.swept = newSweptSet(cfg.MaxSwept)
	}
	r.owned.Store(&stretch{since: notYet})
	return r, nil
}

func (r *Rule) elapsed() int64 { return r.clk.Since(r.born).Nanoseconds() }

// Restart begins a new stretch of ownership now, at memory epoch epoch
// (the memory's current one; an older one than the stretch's keeps the
// stretch's). Call it before the ring changes (the new ring may give this
// node groups another node decided until now), and after every drop, once
// the epoch has moved: a stretch then starts at the drop, not at the next
// question, which comes late when traffic is light.
func (r *Rule) Restart(epoch uint64) {
	now := r.elapsed()
	for {
		s := r.owned.Load()
		if r.owned.CompareAndSwap(s, &stretch{epoch: max(epoch, s.epoch), since: now}) {
			return
		}
	}
}

// Hold ends the current stretch without beginning another: nothing rests
// until the next Restart. Call it while this node's ring cannot be trusted
// to name what it owns (it has not joined its cluster yet: a ring of
// itself owns every group while the others decide them).
func (r *Rule) Hold() {
	for {
		s := r.owned.Load()
		if r.owned.CompareAndSwap(s, &stretch{epoch: s.epoch, since: notYet}) {
			return
		}
	}
}

// Swept records that the sweeper freed key as rested at memory epoch epoch.
func (r *Rule) Swept(epoch uint64, key string) {
	if r.swept != nil {
		r.swept.add(epoch, key)
	}
}

// SweptLen returns how many swept keys are remembered.
func (r *Rule) SweptLen() int {
	if r.swept == nil {
		return 0
	}
	return r.swept.len()
}

// Rested reports whether key, absent from owner memory at memory epoch
// epoch, decides as rested without a load: it was swept at epoch, or this
// node has owned its groups since before epoch's stretch began for longer
// than span plus the margin. span is the furthest, in nanoseconds, that
// any earlier owner's TAT of key can run ahead of its last decision (see
// the package doc); a negative span means unknown, and only the swept set
// answers. The first call at an epoch newer than the stretch's starts a new
// stretch, and answers false.
func (r *Rule) Rested(epoch uint64, key string, span int64) bool {
	s := r.owned.Load()
	if s.since == notYet { // before the first ring, or held (Hold)
		return false
	}
	if r.swept != nil && r.swept.has(epoch, key) {
		return true
	}
	if span < 0 {
		return false
	}
	if span > r.widest.Load() {
		r.widest.Store(span) // a race may keep the smaller: Likely only guesses
	}
	switch {
	case s.epoch == epoch:
		return r.elapsed()-s.since >= span+r.margin
	case epoch > s.epoch: // the memory was dropped since: ownership restarts
		r.owned.CompareAndSwap(s, &stretch{epoch: epoch, since: r.elapsed()})
	}
	return false
}

// Likely is Rested for a caller that does not know key's span: it guesses
// the longest span Rested has been asked about (none yet: not rested). A
// hint, never a decision: it may be wrong either way when limits change.
func (r *Rule) Likely(epoch uint64, key string) bool {
	if r.swept != nil && r.swept.has(epoch, key) {
		return true
	}
	w := r.widest.Load()
	s := r.owned.Load()
	return w > 0 && s.since != notYet && s.epoch == epoch && r.elapsed()-s.since >= w+r.margin
}

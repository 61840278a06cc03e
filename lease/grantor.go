package lease

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/weirhq/weir/gcra"
)

// GrantorConfig tunes a Grantor.
type GrantorConfig struct {
	// Name identifies this ledger in its leases; returns naming another
	// ledger credit nothing. Make it change when the node restarts (node
	// name plus boot incarnation), since lease numbers start again at 1.
	Name string
	// Grace is added to every lease's lifetime on the owner. A peer's lease
	// ends TTL after it sent the request, which is never later than TTL
	// after the owner received it; Grace covers the two clocks running at
	// slightly different rates. Longer costs capacity, never exactness.
	Grace time.Duration
}

// DefaultGrantorConfig returns a 5ms grace. Name must still be set.
func DefaultGrantorConfig() GrantorConfig { return GrantorConfig{Grace: 5 * time.Millisecond} }

// Validate reports whether c is usable. It changes nothing.
func (c GrantorConfig) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("lease: grantor name is required")
	case c.Grace < 0:
		return fmt.Errorf("lease: grace %s must not be negative", c.Grace)
	}
	return nil
}

// GrantorStats are a Grantor's cumulative counts for one limit, for
// metrics.
type GrantorStats struct {
	Grants, Denials, Capped, Busy int64
	// GrantedUnits, CreditedUnits and ExpiredUnits count units granted,
	// returned and credited, and left in leases that expired unsettled (an
	// upper bound on stranded units: the owner cannot know how many of
	// them the peer spent).
	GrantedUnits, CreditedUnits, ExpiredUnits int64
}

// Reservation summarises a key's open leases for a new owner: Units units
// held by peers until at most Until (owner time base, nanoseconds).
type Reservation struct {
	Units int64
	Until int64
}

// Floor is a key whose expired leases Sweep dropped: its TAT must become at
// least TAT (for example with memstore.Store.Put, which keeps the later).
type Floor struct {
	Group, Key string
	TAT        int64
}

// Grantor is an owner's lease ledger: the leases it granted on each key,
// and the accounting that keeps every key exact while they are out.
//
// Units at peers are charged to the key's TAT when granted, and while a
// lease is open the key may not refill into the room its units occupy: the
// TAT a decision uses is never less than now + outstanding × interval (see
// Effective). That is what keeps admitted units within B + W/T however the
// peers time their spending. A return credits exactly the units the peer
// reports unspent; an expired lease's units are never credited.
//
// A Grantor does no I/O and reads no clock: the TAT and now come in, the new
// TAT goes out in Answer.TAT and the caller stores it. It is not safe for
// concurrent use: call it under the lock that guards the keys' TATs. The
// methods that change nothing (Effective, Outstanding, Reservation, Due,
// Keys, Stats) only read it, so they may run concurrently with one another
// (under a read lock), never with any other method.
type Grantor struct {
	cfg    GrantorConfig
	nextID uint64
	books  map[bookKey]*book
	stats  map[string]*GrantorStats // by Request.Label
}

type bookKey struct{ group, key string }

// book is one key's open leases, sorted by expiry.
type book struct {
	interval int64  // the key's emission interval at the last grant
	label    string // the key's limit, for stats
	leases   []open
}

type open struct {
	id      uint64 // 0 for a reservation adopted from a previous owner
	peer    string
	units   int64
	expires int64
}

// NewGrantor returns an empty ledger. It returns an error if cfg is invalid.
func NewGrantor(cfg GrantorConfig) (*Grantor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Grantor{cfg: cfg, books: make(map[bookKey]*book), stats: make(map[string]*GrantorStats)}, nil
}

// Stats returns the cumulative counts per limit label (Request.Label).
func (g *Grantor) Stats() map[string]GrantorStats {
	out := make(map[string]GrantorStats, len(g.stats))
	for l, s := range g.stats {
		out[l] = *s
	}
	return out
}

func (g *Grantor) stat(label string) *GrantorStats {
	s := g.stats[label]
	if s == nil {
		s = &GrantorStats{}
		g.stats[label] = s
	}
	return s
}

// Outstanding returns the units held by open leases on the key at now.
func (g *Grantor) Outstanding(group, key string, now int64) int64 {
	b := g.books[bookKey{group, key}]
	if b == nil {
		return 0
	}
	var n int64
	for _, l := range b.leases {
		if l.expires > now {
			n += l.units
		}
	}
	return n
}

// Effective returns the TAT that a decision on the key at now must use in
// place of tat: tat raised so that the units out on leases (and those that
// were out until they expired) are not refilled. Pass it to gcra.Decide or
// gcra.DecideComposite; storing it or the decision's TAT is always safe.
// Keys without leases get tat back. Effective changes nothing.
func (g *Grantor) Effective(group, key string, tat, now int64) int64 {
	b := g.books[bookKey{group, key}]
	if b == nil {
		return tat
	}
	tat, held, _ := b.walk(tat, now)
	return max(tat, floorAt(now, held, b.interval))
}

// walk folds the leases that expired at or before now into tat, in expiry
// order: just before each expiry the key could not have refilled past
// expiry + outstanding × interval. It returns the folded TAT, the units
// still held at now and how many leading leases expired.
func (b *book) walk(tat, now int64) (folded, held int64, expired int) {
	for _, l := range b.leases {
		held += l.units
	}
	for _, l := range b.leases {
		if l.expires > now {
			break
		}
		tat = max(tat, floorAt(l.expires, held, b.interval))
		held -= l.units
		expired++
	}
	return tat, held, expired
}

// floorAt is at + units × interval, saturating instead of overflowing.
func floorAt(at, units, interval int64) int64 {
	if units > 0 && interval > (math.MaxInt64-max(at, 0))/units {
		return math.MaxInt64
	}
	return at + units*interval
}

// expire drops the leases walk found expired and counts them.
func (g *Grantor) expire(b *book, n int) {
	for _, l := range b.leases[:n] {
		g.stat(b.label).ExpiredUnits += l.units
	}
	b.leases = slices.Delete(b.leases, 0, n)
}

// Grant settles req.Return and decides req's ask on the key whose state is
// tat at now. It returns the answer, whose TAT the caller must store as the
// key's state before replying. A malformed request gets an error wrapping
// ErrInvalidRequest (or the limit's or terms' error) and changes nothing.
//
// The ask is sized by Size from req.Demand, then capped so that all open
// leases on the key hold at most Cap(limit) units, and then charged like a
// decision of that cost: all of it if it fits now, else the most that fits,
// else a denial with the exact retry-after of one unit. A peer that still
// has an unsettled lease on the key is answered Busy: one open lease per
// peer and key bounds what a lost message strands.
func (g *Grantor) Grant(tat, now int64, req Request) (Answer, error) {
	k := bookKey{req.Group, req.Key}
	b := g.books[k]
	if err := g.check(b, req); err != nil {
		return Answer{}, err
	}
	if b == nil {
		b = &book{}
		g.books[k] = b
	}
	b.interval, b.label = req.Limit.Interval, req.Label
	tat, held, expired := b.walk(tat, now)
	g.expire(b, expired)
	var ans Answer
	// A lease that expired before its return arrived credits nothing: its
	// units were written off when it expired. Nor does another ledger's.
	if ret := b.find(req.Return.Lease); ret >= 0 && req.Return.Grantor == g.cfg.Name {
		// The returned units and the spent ones leave the reservation
		// now: fold the floor first, then give back the unspent units.
		tat = max(tat, floorAt(now, held, b.interval)) - req.Return.Unspent*b.interval
		held -= b.leases[ret].units
		b.leases = slices.Delete(b.leases, ret, ret+1)
		ans.Credited = req.Return.Unspent
		g.stat(b.label).CreditedUnits += ans.Credited
	}
	ans = g.ask(b, tat, held, now, req, ans)
	if len(b.leases) == 0 {
		delete(g.books, k)
	}
	return ans, nil
}

// check validates req against the ledger. A return of a lease the ledger
// does not hold (already expired, or granted by another owner) is valid and
// credits nothing.
func (g *Grantor) check(b *book, req Request) error {
	switch {
	case req.Peer == "" || req.Key == "":
		return fmt.Errorf("%w: peer and key are required", ErrInvalidRequest)
	case math.IsNaN(req.Demand) || math.IsInf(req.Demand, 0) || req.Demand < 0:
		return fmt.Errorf("%w: demand %v must be a finite rate >= 0", ErrInvalidRequest, req.Demand)
	case req.Return.Unspent < 0 || (req.Return.Lease == 0 && req.Return.Unspent != 0):
		return fmt.Errorf("%w: return of %d units of lease %d", ErrInvalidRequest, req.Return.Unspent, req.Return.Lease)
	}
	if err := req.Limit.Validate(); err != nil {
		return err
	}
	if err := req.Terms.Validate(); err != nil {
		return err
	}
	if b == nil || req.Return.Grantor != g.cfg.Name {
		return nil
	}
	if i := b.find(req.Return.Lease); i >= 0 {
		if l := b.leases[i]; l.peer != req.Peer || req.Return.Unspent > l.units {
			return fmt.Errorf("%w: %s returns %d units of lease %d, which %s holds with %d",
				ErrInvalidRequest, req.Peer, req.Return.Unspent, l.id, l.peer, l.units)
		}
	}
	return nil
}

// find returns the index of lease id, or -1 (always for id 0).
func (b *book) find(id uint64) int {
	if id == 0 {
		return -1
	}
	return slices.IndexFunc(b.leases, func(l open) bool { return l.id == id })
}

// ask decides the new lease of a validated request on a settled book.
func (g *Grantor) ask(b *book, tat, held, now int64, req Request, ans Answer) Answer {
	ans.TAT = tat
	st := g.stat(b.label)
	want := Size(req.Demand, req.Terms)
	switch {
	case want == 0:
		ans.Outcome = Settled
		return ans
	case slices.ContainsFunc(b.leases, func(l open) bool { return l.peer == req.Peer }):
		ans.Outcome = Busy
		st.Busy++
		return ans
	case Cap(req.Limit)-held < 1:
		ans.Outcome = Capped
		st.Capped++
		return ans
	}
	n := min(want, Cap(req.Limit)-held)
	base := max(tat, floorAt(now, held, b.interval))
	res, _ := gcra.Decide(base, now, req.Limit, n) // limit validated, n >= 1
	var start int64
	switch {
	case res.Allowed:
	case req.Scheduled:
		n, start = schedule(base, now, n, req)
		if n >= 1 {
			res = gcra.Result{Allowed: true, TAT: max(base, now) + n*req.Limit.Interval}
		}
	case res.Remaining >= 1:
		n = min(n, res.Remaining)
		res, _ = gcra.Decide(base, now, req.Limit, n)
	}
	if !res.Allowed {
		one, _ := gcra.Decide(base, now, req.Limit, 1)
		ans.Outcome, ans.RetryAfter = Denied, one.RetryAfter
		st.Denials++
		return ans
	}
	g.nextID++
	l := open{id: g.nextID, peer: req.Peer, units: n, expires: now + req.Terms.ttlNanos() + g.cfg.Grace.Nanoseconds()}
	b.insert(l)
	ans.Outcome, ans.TAT, ans.Grantor, ans.Lease, ans.Units, ans.TTL = Granted, res.TAT, g.cfg.Name, l.id, n, req.Terms.ttlNanos()
	if res.TAT-now > req.Limit.Span() { // some units are for later
		ans.Start, ans.Spacing = start, req.Limit.Interval
	}
	// A grant that leaves the key at its edge says when the next unit
	// fits, as a denial would: the peer refuses locally until then once it
	// has spent the grant, instead of forwarding each request of a
	// saturated key.
	next, _ := gcra.Decide(max(res.TAT, floorAt(now, held+n, b.interval)), now, req.Limit, 1)
	ans.RetryAfter = next.RetryAfter
	st.Grants++
	st.GrantedUnits += n
	return ans
}

// schedule sizes a scheduled grant of at most n units on a key whose
// effective TAT is base at now, where n do not all fit now: the j-th unit
// (from 1) is spendable from max(base, now) + (j − B)·T, the moment GCRA
// would have admitted it, and the last of them at most half the TTL after
// now, so that every unit is spendable well before the lease ends and the
// peer has time to spend the last. It returns the units (0: not even one
// fits within that half) and the first unit's time relative to now.
func schedule(base, now, n int64, req Request) (units, start int64) {
	l := req.Limit
	ahead := max(base, now) - now // >= 0, and no sum of absolute times
	room := req.Terms.ttlNanos()/2 + l.Span() - ahead
	if room < l.Interval {
		return 0, 0
	}
	n = min(n, room/l.Interval)
	return n, ahead + (1-l.Burst)*l.Interval
}

// insert adds l keeping the leases sorted by expiry.
func (b *book) insert(l open) {
	i, _ := slices.BinarySearchFunc(b.leases, l.expires, func(o open, e int64) int {
		if o.expires <= e {
			return -1
		}
		return 1
	})
	b.leases = slices.Insert(b.leases, i, l)
}

// Sweep drops every lease that expired at or before now and returns, for
// each key that had one, the TAT the key must be raised to (store it with
// memstore.Store.Put, which keeps the later of the two). Call it every few
// TTLs so that idle keys' ledgers do not accumulate.
func (g *Grantor) Sweep(now int64) []Floor {
	var floors []Floor
	for k, b := range g.books {
		tat, _, expired := b.walk(math.MinInt64, now)
		if expired == 0 {
			continue
		}
		g.expire(b, expired)
		floors = append(floors, Floor{Group: k.group, Key: k.key, TAT: tat})
		if len(b.leases) == 0 {
			delete(g.books, k)
		}
	}
	return floors
}

// Reservation summarises the key's open leases at now, for the TAT a
// departing owner persists: a new owner that Adopts it keeps the key exact.
// The zero Reservation means no lease is open.
func (g *Grantor) Reservation(group, key string, now int64) Reservation {
	var r Reservation
	b := g.books[bookKey{group, key}]
	if b == nil {
		return r
	}
	for _, l := range b.leases {
		if l.expires > now {
			r.Units += l.units
			r.Until = max(r.Until, l.expires)
		}
	}
	if r.Units == 0 {
		return Reservation{}
	}
	return r
}

// Adopt records a reservation persisted by a previous owner of the key, as
// one lease that nobody can return: the units stay unrefilled until
// r.Until. interval is the key's emission interval. A zero or already
// expired reservation (r.Until <= now) changes nothing.
func (g *Grantor) Adopt(group, key string, interval int64, r Reservation, now int64) error {
	if r.Units < 0 || interval <= 0 {
		return fmt.Errorf("%w: reservation of %d units at interval %dus", ErrInvalidRequest, r.Units, interval)
	}
	if r.Units == 0 || r.Until <= now {
		return nil
	}
	k := bookKey{group, key}
	b := g.books[k]
	if b == nil {
		b = &book{}
		g.books[k] = b
	}
	b.interval = interval
	b.insert(open{units: r.Units, expires: r.Until})
	return nil
}

// Drop forgets the ledgers of every key for which drop returns true (an
// owner handing groups off, after persisting their Reservations) and
// returns how many it forgot.
func (g *Grantor) Drop(drop func(group, key string) bool) int {
	n := 0
	for k := range g.books {
		if drop(k.group, k.key) {
			delete(g.books, k)
			n++
		}
	}
	return n
}

// Keys returns how many keys have a ledger (an open or unfolded lease).
// Zero means Effective returns every TAT unchanged.
func (g *Grantor) Keys() int { return len(g.books) }

// Due returns the keys with a lease that expired at or before now, each
// with the TAT its expiries fold to from nothing, for a caller that
// settles them one by one with Expire under each key's own lock (Sweep
// does all at once, for a caller holding every key's lock).
func (g *Grantor) Due(now int64) []Floor {
	var due []Floor
	for k, b := range g.books {
		if len(b.leases) > 0 && b.leases[0].expires <= now {
			tat, _, _ := b.walk(math.MinInt64, now)
			due = append(due, Floor{Group: k.group, Key: k.key, TAT: tat})
		}
	}
	return due
}

// Expire folds the key's leases that expired at or before now into tat,
// forgets them, and returns the TAT the key must be stored with. Call it
// under the lock that guards the key's TAT, and store the result before
// releasing it: between the two, the expired leases are no longer in
// Effective.
func (g *Grantor) Expire(group, key string, tat, now int64) int64 {
	k := bookKey{group, key}
	b := g.books[k]
	if b == nil {
		return tat
	}
	tat, _, n := b.walk(tat, now)
	g.expire(b, n)
	if len(b.leases) == 0 {
		delete(g.books, k)
	}
	return tat
}

package permit

import (
	"errors"
	"fmt"
	"math"
	"time"
)

const (
	// MaxInFlight caps Limit.MaxInFlight and the slots one Set holds:
	// 10,000, so a key's live set stays near 1 MB at most.
	MaxInFlight = 10_000
	// MaxTTL caps a permit's time to live: 24 hours, in nanoseconds.
	MaxTTL = int64(24 * time.Hour)
	// MaxTime is the latest now a Set works with: now + MaxTTL never
	// overflows. A later now reads as MaxTime, a negative one as 0.
	MaxTime = math.MaxInt64 - MaxTTL
)

var (
	// ErrInvalidLimit is returned for a limit that fails [Limit.Validate].
	ErrInvalidLimit = errors.New("permit: invalid limit")
	// ErrInvalidCost is returned for a cost that is zero or negative.
	ErrInvalidCost = errors.New("permit: cost must be positive")
	// ErrInvalidTTL is returned by Renew for a ttl outside (0, MaxTTL].
	ErrInvalidTTL = errors.New("permit: invalid ttl")
	// ErrInvalidID is returned for the all-zero id, which no random
	// source hands out in practice: it marks an id the caller never set.
	ErrInvalidID = errors.New("permit: zero id")
	// ErrDuplicateID is returned by Commit for an id that is already live.
	ErrDuplicateID = errors.New("permit: id already live")
	// ErrNoRoom is returned by Commit when the permit does not fit: the
	// caller committed without an admitting Check at the same time.
	ErrNoRoom = errors.New("permit: no room")
)

// ID is a permit's identity and the proof of holding it: 128 bits the
// caller draws from a cryptographic random source.
type ID [16]byte

// Limit is one concurrency limit.
type Limit struct {
	// MaxInFlight is N, the most slots live at once: 1..MaxInFlight.
	MaxInFlight int64
	// TTL is how long a permit lives unless renewed, in nanoseconds:
	// (0, MaxTTL].
	TTL int64
}

// Validate reports whether l can be used. It changes nothing.
func (l Limit) Validate() error {
	switch {
	case l.MaxInFlight <= 0 || l.MaxInFlight > MaxInFlight:
		return fmt.Errorf("%w: max_in_flight %d outside 1..%d", ErrInvalidLimit, l.MaxInFlight, MaxInFlight)
	case l.TTL <= 0 || l.TTL > MaxTTL:
		return fmt.Errorf("%w: ttl %dns outside (0, %dns]", ErrInvalidLimit, l.TTL, MaxTTL)
	}
	return nil
}

// Decision is the answer to Check or Acquire.
type Decision struct {
	// Allowed reports that the permit fits (Check) or was added (Acquire).
	Allowed bool
	// TooCostly reports a cost above the limit's MaxInFlight: it never
	// fits, so RetryAfter is zero. Allowed is then false.
	TooCostly bool
	// RetryAfter is, for a denial, the exact wait in nanoseconds until
	// enough live permits expire for the same request to fit, if none is
	// released or renewed meanwhile. Zero when allowed or TooCostly.
	RetryAfter int64
	// InFlight is the slots held after the decision.
	InFlight int64
	// Remaining is the slots free after the decision (0 when a lowered
	// limit sits below what is already held).
	Remaining int64
	// Expiry is an acquired permit's expiry (Unix ns); zero otherwise.
	Expiry int64
}

// Permit is one live permit as [Set.Permits] lists it.
type Permit struct {
	ID     ID
	Cost   int64
	Expiry int64 // Unix ns; the permit is live while now < Expiry
}

// Set is the live permits of one key. The zero value is an empty set
// ready to use. Not safe for concurrent use.
type Set struct {
	latest  int64         // latest now seen; time never goes back
	used    int64         // sum of the costs in byID
	expired int64         // permits dropped because their TTL passed, ever
	byID    map[ID]*entry // every held permit, expired ones until dropped
	heap    expiryHeap    // the same entries, earliest expiry first
}

// tick clamps now to [latest, MaxTime], remembers it and drops every
// permit expired by then. It is the only place time enters a Set.
func (s *Set) tick(now int64) int64 {
	now = min(max(now, 0, s.latest), MaxTime)
	s.latest = now
	for len(s.heap) > 0 && s.heap[0].expiry <= now {
		e := s.heap.popMin()
		delete(s.byID, e.id)
		s.used -= e.cost
		s.expired++
	}
	return now
}

// Expire drops the permits expired by now and returns how many it
// dropped, for a caller that sweeps idle keys (an empty Set can be
// forgotten) or reports slots in use.
func (s *Set) Expire(now int64) int {
	before := s.expired
	s.tick(now)
	return int(s.expired - before)
}

// Expired is how many permits this Set has dropped because their TTL
// passed (not released), since it was made or decoded: the count of
// callers that crashed or forgot to release. The encoding does not carry it.
func (s *Set) Expired() int64 { return s.expired }

// Len is the number of permits held, as of the latest call.
func (s *Set) Len() int { return len(s.byID) }

// InFlight is the slots held, as of the latest call.
func (s *Set) InFlight() int64 { return s.used }

// Latest is the latest time the Set has seen (0 for a new one).
func (s *Set) Latest() int64 { return s.latest }

// Check says whether a permit of cost fits at now, without adding it.
// It only drops permits expired by now and remembers now as the latest
// time, which no later call can tell apart from not having checked.
func (s *Set) Check(now int64, l Limit, cost int64) (Decision, error) {
	if err := validate(l, cost); err != nil {
		return Decision{}, err
	}
	now = s.tick(now)
	return s.decide(now, l, cost), nil
}

// Commit adds a permit of cost with id at now, expiring at now + l.TTL.
// It returns ErrNoRoom (and changes nothing) if the permit does not fit,
// ErrDuplicateID for a live id and ErrInvalidID for the zero id.
func (s *Set) Commit(now int64, l Limit, id ID, cost int64) (Decision, error) {
	if err := validate(l, cost); err != nil {
		return Decision{}, err
	}
	if id == (ID{}) {
		return Decision{}, ErrInvalidID
	}
	now = s.tick(now)
	if _, ok := s.byID[id]; ok {
		return Decision{}, ErrDuplicateID
	}
	d := s.decide(now, l, cost)
	if !d.Allowed {
		return Decision{}, fmt.Errorf("%w: %d of %d slots held, cost %d", ErrNoRoom, s.used, l.MaxInFlight, cost)
	}
	s.add(&entry{id: id, cost: cost, expiry: now + l.TTL})
	d.Expiry = now + l.TTL
	return d, nil
}

// Acquire is Check then, if it admits, Commit: a denial changes nothing
// and says how long to wait.
func (s *Set) Acquire(now int64, l Limit, id ID, cost int64) (Decision, error) {
	d, err := s.Check(now, l, cost)
	if err != nil || !d.Allowed {
		return d, err
	}
	return s.Commit(now, l, id, cost)
}

// Release ends the permit id at now and reports whether it was live. A
// second release of the same id, an expired or an unknown one reports
// false and changes nothing, so Release is idempotent.
func (s *Set) Release(now int64, id ID) bool {
	s.tick(now)
	e, ok := s.byID[id]
	if !ok {
		return false
	}
	s.heap.remove(e)
	delete(s.byID, id)
	s.used -= e.cost
	return true
}

// Renew sets a live permit's expiry to now + ttl and returns it. For an
// expired or unknown id it returns false and changes nothing; a ttl
// outside (0, MaxTTL] is ErrInvalidTTL. A ttl shorter than what is left
// shortens the permit: the caller states how long it still needs.
func (s *Set) Renew(now int64, id ID, ttl int64) (expiry int64, ok bool, err error) {
	if ttl <= 0 || ttl > MaxTTL {
		return 0, false, fmt.Errorf("%w: %dns outside (0, %dns]", ErrInvalidTTL, ttl, MaxTTL)
	}
	now = s.tick(now)
	e, ok := s.byID[id]
	if !ok {
		return 0, false, nil
	}
	e.expiry = now + ttl
	s.heap.fix(e)
	return e.expiry, true, nil
}

// Expiry returns the expiry of the permit id, live or not yet expired
// away by a later call; false for an unknown id. It changes nothing.
func (s *Set) Expiry(id ID) (int64, bool) {
	e, ok := s.byID[id]
	if !ok {
		return 0, false
	}
	return e.expiry, true
}

// Permits lists the live permits at now, earliest expiry first.
func (s *Set) Permits(now int64) []Permit {
	s.tick(now)
	out := make([]Permit, 0, len(s.heap))
	for _, e := range s.heap.sorted() {
		out = append(out, Permit{ID: e.id, Cost: e.cost, Expiry: e.expiry})
	}
	return out
}

func validate(l Limit, cost int64) error {
	if cost <= 0 {
		return fmt.Errorf("%w: got %d", ErrInvalidCost, cost)
	}
	return l.Validate()
}

// decide assumes expired permits are dropped as of now.
func (s *Set) decide(now int64, l Limit, cost int64) Decision {
	free := max(l.MaxInFlight-s.used, 0)
	switch {
	case cost > l.MaxInFlight:
		return Decision{TooCostly: true, InFlight: s.used, Remaining: free}
	case cost <= free:
		return Decision{Allowed: true, InFlight: s.used + cost, Remaining: free - cost}
	}
	return Decision{RetryAfter: s.freedAt(s.used+cost-l.MaxInFlight) - now, InFlight: s.used, Remaining: free}
}

// freedAt is the earliest expiry by which permits holding at least need
// slots have expired. 0 < need <= s.used holds, as cost <= MaxInFlight.
func (s *Set) freedAt(need int64) int64 {
	if first := s.heap[0]; first.cost >= need {
		return first.expiry
	}
	var freed int64
	for _, e := range s.heap.sorted() {
		if freed += e.cost; freed >= need {
			return e.expiry
		}
	}
	panic("permit: slots held and their permits disagree") // unreachable: used is the sum of the costs
}

func (s *Set) add(e *entry) {
	if s.byID == nil {
		s.byID = make(map[ID]*entry)
	}
	s.byID[e.id] = e
	s.heap.push(e)
	s.used += e.cost
}

package ring

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

// Hasher turns bytes into a 64-bit hash. It places both groups and virtual
// nodes on the ring, so it must be deterministic and the same on every node.
// Implementations must be safe for concurrent use.
type Hasher interface {
	Sum64([]byte) uint64
}

// stringHasher is an optional fast path: a Hasher that can hash a string
// without converting it to a []byte lets Owner run without allocating.
type stringHasher interface {
	Sum64String(string) uint64
}

// xxHasher is the default Hasher.
type xxHasher struct{}

func (xxHasher) Sum64(b []byte) uint64       { return xxhash.Sum64(b) }
func (xxHasher) Sum64String(s string) uint64 { return xxhash.Sum64String(s) }

var (
	_ Hasher       = xxHasher{}
	_ stringHasher = xxHasher{}
)

// ErrTooManyMembers is returned by [New] and [Ring.Set] when there are more
// members than partitions: bounded-load assignment then has no room to give
// every member a share. Raise Config.PartitionCount.
var ErrTooManyMembers = errors.New("ring: more members than partitions")

// Config tunes the ring. Every node of a cluster must use the same values,
// or nodes disagree about owners.
type Config struct {
	// PartitionCount is the number of partitions groups hash into. Owners
	// are assigned per partition, so this bounds how finely load can be
	// spread and how many members the ring can hold. A prime spreads
	// sequential hashes best. Default 2039.
	PartitionCount int
	// ReplicationFactor is the number of virtual nodes per member. More
	// virtual nodes spread partitions more evenly at the cost of a slower
	// rebuild on Set. At least 2. Default 64.
	ReplicationFactor int
	// Load is the bounded-load factor: no member owns more than
	// ceil(Load * PartitionCount/members) partitions. Lower is more even
	// but moves more partitions when membership changes. Must be > 1.
	// Default 1.25.
	Load float64
	// Hasher hashes groups and virtual nodes. Default xxhash (64-bit).
	Hasher Hasher
}

// DefaultConfig returns the recommended configuration.
func DefaultConfig() Config {
	return Config{
		PartitionCount:    2039,
		ReplicationFactor: 64,
		Load:              1.25,
		Hasher:            xxHasher{},
	}
}

// Validate reports the first invalid field. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.PartitionCount < 1:
		return fmt.Errorf("ring: partition count %d must be positive", c.PartitionCount)
	case c.ReplicationFactor < 2:
		// With one virtual node per member, consistent's assignment walk
		// can give up one node short of a member with room and panic.
		return fmt.Errorf("ring: replication factor %d must be at least 2", c.ReplicationFactor)
	case !(c.Load > 1):
		// At Load <= 1 the members' combined capacity can fall short of the
		// partition count, which consistent reports by panicking.
		return fmt.Errorf("ring: load factor %v must be greater than 1", c.Load)
	case c.Hasher == nil:
		return errors.New("ring: hasher is nil")
	}
	return nil
}

// Ring maps a group to the name of the member that owns it.
//
// Concurrency: a Ring is safe for concurrent use. Readers load an immutable
// snapshot through an atomic pointer, so Owner never blocks; Set builds a new
// snapshot under a mutex (writers serialise) and swaps it in.
type Ring struct {
	cfg  Config
	snap atomic.Pointer[snapshot]
	mu   sync.Mutex // serialises Set
}

// snapshot is one immutable assignment of partitions to members.
type snapshot struct {
	version uint64
	epoch   uint64   // fingerprint(members, owners)
	members []string // sorted, unique
	owners  []string // owners[partition] = member name; nil when empty
}

// New returns a ring over members, which may be empty. Duplicate and empty
// names are ignored. It returns an error if cfg is invalid or there are more
// members than partitions ([ErrTooManyMembers]).
func New(cfg Config, members ...string) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Ring{cfg: cfg}
	s, err := build(cfg, normalize(members))
	if err != nil {
		return nil, err
	}
	r.snap.Store(s)
	return r, nil
}

// Set replaces the membership, typically from membership events. It is a
// no-op (the version does not change) when the set of names is unchanged,
// whatever its order. On error ([ErrTooManyMembers]) the old membership
// keeps serving.
func (r *Ring) Set(members []string) error {
	names := normalize(members)
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	if slices.Equal(old.members, names) {
		return nil
	}
	s, err := build(r.cfg, names)
	if err != nil {
		return err
	}
	s.version = old.version + 1
	r.snap.Store(s)
	return nil
}

// Owner returns the member that owns group, and false when the ring is
// empty. It does not allocate with the default Hasher.
func (r *Ring) Owner(group string) (string, bool) {
	owner, _, ok := r.OwnerAt(group)
	return owner, ok
}

// Members returns the member names, sorted. The caller may modify the slice.
func (r *Ring) Members() []string {
	return slices.Clone(r.snap.Load().members)
}

// Version starts at 0 and increments on every Set that changes membership.
func (r *Ring) Version() uint64 {
	return r.snap.Load().version
}

// normalize sorts names and drops duplicates and empty names, so that the
// same set always builds the same ring.
func normalize(members []string) []string {
	names := make([]string, 0, len(members))
	for _, m := range members {
		if m != "" {
			names = append(names, m)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// build assigns every partition to a member with consistent's bounded-load
// algorithm and flattens the result into a slice indexed by partition.
func build(cfg Config, names []string) (*snapshot, error) {
	s := &snapshot{members: names, epoch: fingerprint(nil, nil)}
	if len(names) == 0 {
		return s, nil
	}
	if len(names) > cfg.PartitionCount {
		return nil, fmt.Errorf("%w: %d members, %d partitions", ErrTooManyMembers, len(names), cfg.PartitionCount)
	}
	ms := make([]consistent.Member, len(names))
	for i, n := range names {
		ms[i] = member(n)
	}
	c := consistent.New(ms, consistent.Config{
		PartitionCount:    cfg.PartitionCount,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              cfg.Load,
		Hasher:            cfg.Hasher,
	})
	s.owners = make([]string, cfg.PartitionCount)
	for p := range s.owners {
		s.owners[p] = string(c.GetPartitionOwner(p).(member))
	}
	s.epoch = fingerprint(names, s.owners)
	return s, nil
}

// member is a ring member as consistent sees it. consistent hashes virtual
// node i of a member as String()+decimal(i), so plain names collide whenever
// one name is another plus digits ("node1"+"10" == "node11"+"0"), and the
// later member silently steals the earlier one's virtual node. Ending every
// String() in '#' makes the name recoverable from each virtual-node key (it
// is everything before the last '#'), so no two keys collide.
type member string

func (m member) String() string { return string(m) + "#" }

package reservation

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/weirhq/weir/gcra"
)

// DefaultMaxRecords is DefaultConfig's bound of open records on a node.
const DefaultMaxRecords = 100_000

// maxMaxRecords bounds Config.MaxRecords: a record is a few hundred bytes.
const maxMaxRecords = 1 << 24

var (
	// ErrFull is returned by Put when the table holds Config.MaxRecords
	// records and the caller claimed no room for this one (Claim).
	ErrFull = errors.New("reservation: table full")
	// ErrInvalid is returned by Put for a record without an id or keys,
	// with a key that is empty or has an invalid limit, or whose id is
	// already open.
	ErrInvalid = errors.New("reservation: invalid record")
)

// Config bounds a Table.
type Config struct {
	// MaxRecords bounds the records open on the node. Beyond it the owner
	// refuses reservations (reason reservations_full). 1 to 2^24.
	MaxRecords int
}

// DefaultConfig returns MaxRecords DefaultMaxRecords.
func DefaultConfig() Config { return Config{MaxRecords: DefaultMaxRecords} }

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error {
	if c.MaxRecords < 1 || c.MaxRecords > maxMaxRecords {
		return fmt.Errorf("reservation: max records %d outside [1, %d]", c.MaxRecords, maxMaxRecords)
	}
	return nil
}

// ID names a record: the id a reservation token carries.
type ID [16]byte

// Key is one rate key of a record: where its units sit on the key's
// schedule and the limit it was decided at.
type Key struct {
	Key string
	// Name is the key's limit's name (decide.Def.Name), for metrics.
	Name  string
	Limit gcra.Limit
	Res   gcra.Reservation
}

// Record is one open reservation.
type Record struct {
	ID    ID
	Group string
	Keys  []Key
	// Expiry is when Sweep may expire it, on the decisions' time base.
	Expiry int64
}

// Table is an owner's open reservations and the shift counters of their
// keys. It is pure: no clock (the caller passes now), no I/O, no
// goroutines. Safe for concurrent use: one mutex guards it, and it never
// calls out while holding it, so its methods may be called under the
// caller's own locks (the owner calls Pin, Shift and SetShift under a
// memstore shard lock).
type Table struct {
	max int
	mu  struct {
		sync.Mutex
		src     rand.Source // fresh shift counters; not safe for concurrent use itself
		records map[ID]*Record
		claimed int
		keys    map[string]*keyState
	}
}

// keyState is what the table keeps per key: it exists while the key has
// open records or pins (see Pin).
type keyState struct {
	shift int64 // gcra.Settle's shift counter
	open  int   // open records on the key (a key listed twice counts twice)
	pins  int
	// queue is the ids put on the key, oldest first. Removals leave their
	// ids behind (skipped because no open record has them) until compact.
	queue []ID
}

// New returns an empty table. src draws each fresh shift counter (see
// gcra.Settle: a counter that was lost must start from a random value);
// the owner passes a source seeded from crypto/rand, tests a fixed seed.
func New(cfg Config, src rand.Source) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, errors.New("reservation: a random source is required")
	}
	t := &Table{max: cfg.MaxRecords}
	t.mu.src = src
	t.mu.records = make(map[ID]*Record)
	t.mu.keys = make(map[string]*keyState)
	return t, nil
}

// Len returns the number of open records.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.records)
}

// Claim sets room aside for one record, so that a decision made after it
// can always be recorded: false, and nothing set aside, when open records
// and claims fill MaxRecords. Follow it with Put, or Unclaim.
func (t *Table) Claim() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.mu.records)+t.mu.claimed >= t.max {
		return false
	}
	t.mu.claimed++
	return true
}

// Unclaim gives back a Claim that no Put used.
func (t *Table) Unclaim() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.claimed = max(t.mu.claimed-1, 0)
}

// Pin returns key's shift counter, creating it from the random source if
// the key has none, and keeps it until Unpin even if the key's last record
// goes. Read it under the same lock as the key's TAT, at the decision
// whose reservation records it: a settlement in between would otherwise
// move the key back unseen by the reservation.
func (t *Table) Pin(key string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	ks := t.stateLocked(key)
	ks.pins++
	return ks.shift
}

// Unpin undoes one Pin (or one pin Take left on a key).
func (t *Table) Unpin(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ks := t.mu.keys[key]; ks != nil {
		ks.pins = max(ks.pins-1, 0)
		t.forgetLocked(key, ks)
	}
}

// Shift returns key's shift counter; false when the key has none (no
// open record and no pin).
func (t *Table) Shift(key string) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ks := t.mu.keys[key]; ks != nil {
		return ks.shift, true
	}
	return 0, false
}

// SetShift stores key's shift counter (gcra.Settlement.Shift). A key
// without a counter is left alone: nothing open relies on it.
func (t *Table) SetShift(key string, shift int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ks := t.mu.keys[key]; ks != nil {
		ks.shift = shift
	}
}

// stateLocked returns key's state, creating it with a fresh counter.
func (t *Table) stateLocked(key string) *keyState {
	ks := t.mu.keys[key]
	if ks == nil {
		ks = &keyState{shift: int64(t.mu.src.Uint64())}
		t.mu.keys[key] = ks
	}
	return ks
}

// forgetLocked drops key's state once nothing needs it.
func (t *Table) forgetLocked(key string, ks *keyState) {
	if ks.open == 0 && ks.pins == 0 {
		delete(t.mu.keys, key)
	}
}

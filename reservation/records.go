package reservation

import (
	"fmt"
	"slices"

	"github.com/weirhq/weir/gcra"
)

// perKey is how many records may be open on a key of limit l: its burst.
// A key of burst B refunds to at most B open records (B+1 counting one
// that straddles now): the intervals of those whose end lies after now are
// disjoint, each at least one interval long, within now + B·T. Over time a
// key admits more, one per interval, so the bound is a choice, not a
// consequence: an older record can only still charge an excess.
func (t *Table) perKey(l gcra.Limit) int { return int(min(l.Burst, int64(t.max))) }

// Put records rec in the room a Claim set aside (ErrFull without one). A
// key that already holds its burst of open records gives up its oldest
// (first put) to make room: those records are removed and returned, to be
// counted as expired (charged as reserved; a Settle of them finds
// nothing). Refusing instead would let a caller that never settles deny
// its key, or, under an open failure mode, pass uncharged. Invalid input
// (ErrInvalid, ErrFull) changes nothing. The table keeps rec.Keys.
func (t *Table) Put(rec Record) (evicted []Record, err error) {
	if err := check(rec); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.mu.records[rec.ID]; dup {
		return nil, fmt.Errorf("%w: id %x is open", ErrInvalid, rec.ID[:4])
	}
	if t.mu.claimed == 0 {
		return nil, ErrFull
	}
	t.mu.claimed--
	r := &rec
	t.mu.records[rec.ID] = r
	for _, k := range rec.Keys {
		ks := t.stateLocked(k.Key)
		for ks.open >= t.perKey(k.Limit) {
			old := t.oldestLocked(k.Key, ks)
			if old == r { // rec lists k twice: keep its own entry
				ks.queue = slices.Insert(ks.queue, 0, r.ID)
				break
			}
			if old == nil {
				break // not reached: open counts live entries of the queue
			}
			t.removeLocked(old, false)
			evicted = append(evicted, *old)
		}
		ks.open++
		ks.queue = append(ks.queue, rec.ID)
	}
	return evicted, nil
}

func check(rec Record) error {
	if rec.ID == (ID{}) || rec.Group == "" || len(rec.Keys) == 0 {
		return fmt.Errorf("%w: id, group and keys are required", ErrInvalid)
	}
	for i, k := range rec.Keys {
		if k.Key == "" {
			return fmt.Errorf("%w: key %d is empty", ErrInvalid, i)
		}
		if err := k.Limit.Validate(); err != nil {
			return fmt.Errorf("%w: key %d: %w", ErrInvalid, i, err)
		}
	}
	return nil
}

// oldestLocked returns the first record put on key that is still open,
// dropping the queue's stale entries before it.
func (t *Table) oldestLocked(key string, ks *keyState) *Record {
	for len(ks.queue) > 0 {
		id := ks.queue[0]
		ks.queue = ks.queue[1:]
		if r := t.mu.records[id]; r != nil && r.has(key) {
			return r
		}
	}
	return nil
}

func (r *Record) has(key string) bool {
	for _, k := range r.Keys {
		if k.Key == key {
			return true
		}
	}
	return false
}

// Has reports whether id is open.
func (t *Table) Has(id ID) bool {
	_, ok := t.Get(id)
	return ok
}

// Get returns the open record id without removing it. Its Keys are the
// table's: read them, do not change them.
func (t *Table) Get(id ID) (Record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.mu.records[id]; r != nil {
		return *r, true
	}
	return Record{}, false
}

// Take removes and returns the open record id if it is of group and keys
// (in order); false, and nothing changes, otherwise: unknown, expired,
// settled, or named with other keys than it was made on. It pins each of
// the record's keys (Pin), so their shift counters outlive the record
// while the caller settles it: call Done(rec) after.
func (t *Table) Take(id ID, group string, keys []string) (Record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.mu.records[id]
	if r == nil || r.Group != group || len(r.Keys) != len(keys) {
		return Record{}, false
	}
	for i, k := range r.Keys {
		if k.Key != keys[i] {
			return Record{}, false
		}
	}
	t.removeLocked(r, true)
	return *r, true
}

// Done unpins the keys of a record Take returned.
func (t *Table) Done(rec Record) {
	for _, k := range rec.Keys {
		t.Unpin(k.Key)
	}
}

// Sweep removes and returns every record whose Expiry is at or before
// now: they are charged as reserved. It scans every record (100,000 take
// about a millisecond); call it at the owner's sweep period.
func (t *Table) Sweep(now int64) []Record {
	return t.removeFunc(func(r *Record) bool { return r.Expiry <= now })
}

// DeleteFunc removes and returns every record with a key for which drop
// returns true: the owner handed the key's group off (records are not
// persisted; a hand-off loses them). drop must not call the table.
func (t *Table) DeleteFunc(drop func(key string) bool) []Record {
	return t.removeFunc(func(r *Record) bool {
		for _, k := range r.Keys {
			if drop(k.Key) {
				return true
			}
		}
		return false
	})
}

func (t *Table) removeFunc(match func(*Record) bool) []Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Record
	for _, r := range t.mu.records {
		if match(r) {
			t.removeLocked(r, false)
			out = append(out, *r)
		}
	}
	return out
}

// removeLocked removes r, pinning its keys if pin is set.
func (t *Table) removeLocked(r *Record, pin bool) {
	delete(t.mu.records, r.ID)
	for _, k := range r.Keys {
		ks := t.mu.keys[k.Key]
		if ks == nil {
			continue // not reached: an open record's keys have states
		}
		ks.open = max(ks.open-1, 0)
		if pin {
			ks.pins++
		}
		if len(ks.queue) > 2*ks.open+8 {
			t.compactLocked(k.Key, ks)
		}
		t.forgetLocked(k.Key, ks)
	}
}

// compactLocked drops the queue's entries of records no longer open.
func (t *Table) compactLocked(key string, ks *keyState) {
	live := ks.queue[:0]
	for _, id := range ks.queue {
		if r := t.mu.records[id]; r != nil && r.has(key) {
			live = append(live, id)
		}
	}
	clear(ks.queue[len(live):])
	ks.queue = live
}

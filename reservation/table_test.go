package reservation

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weirhq/weir/gcra"
)

var burst2 = gcra.Limit{Interval: 1000, Burst: 2}

func newTable(t *testing.T, max int) *Table {
	t.Helper()
	tb, err := New(Config{MaxRecords: max}, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func rec(id byte, expiry int64, keys ...string) Record {
	r := Record{ID: ID{id}, Group: "g", Expiry: expiry}
	for _, k := range keys {
		r.Keys = append(r.Keys, Key{Key: k, Name: "l", Limit: burst2, Res: gcra.Reservation{Cost: 1}})
	}
	return r
}

func put(t *testing.T, tb *Table, r Record) []Record {
	t.Helper()
	if !tb.Claim() {
		t.Fatalf("no room for %x", r.ID[0])
	}
	ev, err := tb.Put(r)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestConfig_Validate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil || DefaultConfig().MaxRecords != 100_000 {
		t.Fatalf("default: %v", err)
	}
	for _, n := range []int{0, -1, 1<<24 + 1} {
		if err := (Config{MaxRecords: n}).Validate(); err == nil {
			t.Errorf("max records %d accepted", n)
		}
	}
	if _, err := New(DefaultConfig(), nil); err == nil {
		t.Error("nil source accepted")
	}
}

// Claim bounds the node exactly: claims count as records until Put or
// Unclaim, and a Put without a claim is refused with nothing changed.
func TestTable_Claim_boundsTheNode(t *testing.T) {
	tb := newTable(t, 2)
	if !tb.Claim() || !tb.Claim() || tb.Claim() {
		t.Fatal("two claims should fit, a third not")
	}
	tb.Unclaim()
	if !tb.Claim() {
		t.Fatal("an unclaimed room should be free again")
	}
	if _, err := tb.Put(rec(1, 10, "k")); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Put(rec(2, 10, "k")); err != nil {
		t.Fatal(err)
	}
	if tb.Claim() {
		t.Fatal("a full table claimed")
	}
	if _, err := tb.Put(rec(3, 10, "j")); !errors.Is(err, ErrFull) || tb.Has(ID{3}) || tb.Len() != 2 {
		t.Fatalf("put without a claim: %v, len %d", err, tb.Len())
	}
}

func TestTable_Put_invalidChangesNothing(t *testing.T) {
	tb := newTable(t, 4)
	put(t, tb, rec(1, 10, "k"))
	bad := rec(4, 10, "j")
	bad.Keys[0].Limit = gcra.Limit{}
	for i, r := range []Record{rec(0, 10, "k"), rec(1, 10, "j"), {ID: ID{5}, Group: "g"}, rec(6, 10, ""), bad} {
		if !tb.Claim() {
			t.Fatal("no room")
		}
		if _, err := tb.Put(r); !errors.Is(err, ErrInvalid) {
			t.Errorf("case %d: %v", i, err)
		}
		tb.Unclaim()
	}
	if tb.Len() != 1 {
		t.Fatalf("len %d", tb.Len())
	}
	if _, ok := tb.Shift("j"); ok {
		t.Fatal("a refused record left a counter")
	}
}

// A key holds at most its burst of open records: the next Put evicts its
// oldest, whole (its other keys too).
func TestTable_Put_evictsTheOldestOfAFullKey(t *testing.T) {
	tb := newTable(t, 10)
	put(t, tb, rec(1, 10, "k", "other"))
	put(t, tb, rec(2, 10, "k"))
	ev := put(t, tb, rec(3, 10, "k"))
	if len(ev) != 1 || ev[0].ID != (ID{1}) {
		t.Fatalf("evicted %+v, want record 1", ev)
	}
	if tb.Has(ID{1}) || tb.Len() != 2 {
		t.Fatalf("record 1 still open (len %d)", tb.Len())
	}
	if _, ok := tb.Shift("other"); ok {
		t.Fatal("the evicted record's other key kept its counter")
	}
	if _, ok := tb.Take(ID{1}, "g", []string{"k", "other"}); ok {
		t.Fatal("an evicted record was taken")
	}
	// Taken records leave the queue: the next eviction is of record 3.
	if r, ok := tb.Take(ID{2}, "g", []string{"k"}); !ok {
		t.Fatal("record 2 not open")
	} else {
		tb.Done(r)
	}
	put(t, tb, rec(4, 10, "k"))
	if ev := put(t, tb, rec(5, 10, "k")); len(ev) != 1 || ev[0].ID != (ID{3}) {
		t.Fatalf("evicted %+v, want record 3", ev)
	}
}

// A record naming one key twice counts twice and never evicts itself.
func TestTable_Put_keyTwice(t *testing.T) {
	tb := newTable(t, 10)
	one := rec(1, 10, "k", "k")
	one.Keys[0].Limit.Burst, one.Keys[1].Limit.Burst = 1, 1
	if ev := put(t, tb, one); len(ev) != 0 || !tb.Has(ID{1}) {
		t.Fatalf("evicted %+v", ev)
	}
	r, ok := tb.Take(ID{1}, "g", []string{"k", "k"})
	if !ok {
		t.Fatal("not open")
	}
	tb.Done(r)
	if _, ok := tb.Shift("k"); ok {
		t.Fatal("counter outlived its records")
	}
}

// Counters start from the source, live while records or pins do, and a
// lost one starts again from a fresh value.
func TestTable_shiftCounters(t *testing.T) {
	tb := newTable(t, 10)
	src := rand.NewPCG(1, 2)
	first, second := int64(src.Uint64()), int64(src.Uint64())
	if got := tb.Pin("k"); got != first {
		t.Fatalf("fresh counter %d, want the source's first value %d", got, first)
	}
	put(t, tb, rec(1, 10, "k"))
	tb.Unpin("k")
	tb.SetShift("k", first+500)
	if s, ok := tb.Shift("k"); !ok || s != first+500 {
		t.Fatalf("shift %d, %v", s, ok)
	}
	r, _ := tb.Take(ID{1}, "g", []string{"k"})
	if s, ok := tb.Shift("k"); !ok || s != first+500 {
		t.Fatal("Take's pin should keep the counter until Done")
	}
	tb.SetShift("k", first+700)
	tb.Done(r)
	if _, ok := tb.Shift("k"); ok {
		t.Fatal("counter outlived its records and pins")
	}
	tb.SetShift("k", 1) // nothing relies on it: no counter made
	if _, ok := tb.Shift("k"); ok {
		t.Fatal("SetShift made a counter")
	}
	if got := tb.Pin("k"); got != second {
		t.Fatalf("fresh counter %d, want %d", got, second)
	}
}

func TestTable_Take_mismatchChangesNothing(t *testing.T) {
	tb := newTable(t, 10)
	put(t, tb, rec(1, 10, "a", "b"))
	for _, tc := range []struct {
		group string
		keys  []string
	}{{"h", []string{"a", "b"}}, {"g", []string{"b", "a"}}, {"g", []string{"a"}}, {"g", []string{"a", "b", "c"}}} {
		if _, ok := tb.Take(ID{1}, tc.group, tc.keys); ok {
			t.Fatalf("taken as %q %v", tc.group, tc.keys)
		}
	}
	if _, ok := tb.Take(ID{2}, "g", []string{"a", "b"}); ok {
		t.Fatal("unknown id taken")
	}
	r, ok := tb.Take(ID{1}, "g", []string{"a", "b"})
	if !ok || r.ID != (ID{1}) || len(r.Keys) != 2 {
		t.Fatalf("take: %+v, %v", r, ok)
	}
	if _, ok := tb.Take(ID{1}, "g", []string{"a", "b"}); ok {
		t.Fatal("taken twice")
	}
}

func TestTable_Sweep_atExpiry(t *testing.T) {
	tb := newTable(t, 10)
	put(t, tb, rec(1, 100, "a"))
	put(t, tb, rec(2, 101, "a"))
	if got := tb.Sweep(99); len(got) != 0 {
		t.Fatalf("swept %d before expiry", len(got))
	}
	if got := tb.Sweep(100); len(got) != 1 || got[0].ID != (ID{1}) {
		t.Fatalf("at 100: %+v", got)
	}
	if got := tb.Sweep(101); len(got) != 1 || got[0].ID != (ID{2}) || tb.Len() != 0 {
		t.Fatalf("at 101: %+v", got)
	}
	if _, ok := tb.Shift("a"); ok {
		t.Fatal("counter outlived its records")
	}
	if !tb.Claim() {
		t.Fatal("swept records still take room")
	}
}

func TestTable_DeleteFunc(t *testing.T) {
	tb := newTable(t, 10)
	put(t, tb, rec(1, 100, "x:a", "y:b"))
	put(t, tb, rec(2, 100, "y:c"))
	got := tb.DeleteFunc(func(k string) bool { return k[0] == 'x' })
	if len(got) != 1 || got[0].ID != (ID{1}) || !tb.Has(ID{2}) {
		t.Fatalf("dropped %+v", got)
	}
}

// Settling records one by one never lets a key's queue grow past a few
// times its open records.
func TestTable_queueStaysCompact(t *testing.T) {
	tb := newTable(t, 10)
	put(t, tb, rec(255, 1, "k"))
	for i := 1; i < 200; i++ {
		put(t, tb, rec(byte(i), 1, "k"))
		r, ok := tb.Take(ID{byte(i)}, "g", []string{"k"})
		if !ok {
			t.Fatal("not open")
		}
		tb.Done(r)
	}
	tb.mu.Lock()
	n := len(tb.mu.keys["k"].queue)
	tb.mu.Unlock()
	if n > 2*1+8 {
		t.Fatalf("queue of %d entries for one open record", n)
	}
}

// Random operations against a naive model: the open set, each key's
// count (at most its burst) and whether it has a counter.
func TestTable_randomAgainstModel(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 9))
		tb := newTable(t, 6)
		open := map[ID]Record{}
		var order []ID // put order, for evictions
		keys := []string{"a", "b", "c"}
		for step := range 300 {
			switch op := r.IntN(4); {
			case op <= 1:
				id := ID{byte(step), byte(step >> 8), 1}
				picked := slices.Clone(keys[:1+r.IntN(3)])
				r.Shuffle(len(picked), func(i, j int) { picked[i], picked[j] = picked[j], picked[i] })
				rc := rec(0, int64(step+r.IntN(20)), picked...)
				rc.ID = id
				if !tb.Claim() {
					if len(open) < 6 {
						t.Fatalf("seed %d step %d: refused with %d open", seed, step, len(open))
					}
					continue
				}
				want := modelEvict(open, order, picked)
				ev, err := tb.Put(rc)
				if err != nil {
					t.Fatal(err)
				}
				var got []ID
				for _, e := range ev {
					got = append(got, e.ID)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d step %d: evicted %v, model %v", seed, step, got, want)
				}
				open[id] = rc
				order = append(order, id)
			case op == 2 && len(order) > 0:
				id := order[r.IntN(len(order))]
				want, isOpen := open[id]
				got, ok := tb.Take(id, "g", names(want))
				if ok != isOpen || (ok && got.ID != id) {
					t.Fatalf("seed %d step %d: take %v, open %v", seed, step, ok, isOpen)
				}
				if ok {
					tb.Done(got)
					delete(open, id)
				}
			default:
				for _, e := range tb.Sweep(int64(step)) {
					if e.Expiry > int64(step) {
						t.Fatalf("swept early: %+v", e)
					}
					delete(open, e.ID)
				}
			}
			checkModel(t, tb, open, keys)
		}
	}
}

// modelEvict removes from open, and returns, the records a Put on keys
// must evict: per key in turn, the oldest open ones while it holds its
// burst (counting the new record's earlier listings of it).
func modelEvict(open map[ID]Record, order []ID, keys []string) []ID {
	var out []ID
	for i, k := range keys {
		mine := len(slices.DeleteFunc(slices.Clone(keys[:i]), func(s string) bool { return s != k }))
		for count(open, k)+mine >= int(burst2.Burst) {
			for _, id := range order {
				if r, ok := open[id]; ok && slices.Contains(names(r), k) {
					delete(open, id)
					out = append(out, id)
					break
				}
			}
		}
	}
	return out
}

func count(open map[ID]Record, k string) int {
	n := 0
	for _, r := range open {
		n += len(slices.DeleteFunc(names(r), func(s string) bool { return s != k }))
	}
	return n
}

func names(r Record) []string {
	var out []string
	for _, k := range r.Keys {
		out = append(out, k.Key)
	}
	return out
}

func checkModel(t *testing.T, tb *Table, open map[ID]Record, keys []string) {
	t.Helper()
	if tb.Len() != len(open) {
		t.Fatalf("len %d, model %d", tb.Len(), len(open))
	}
	for id := range open {
		if !tb.Has(id) {
			t.Fatalf("%x open in the model only", id[:2])
		}
	}
	for _, k := range keys {
		n := count(open, k)
		if n > int(burst2.Burst) {
			t.Fatalf("key %s: %d open, burst %d", k, n, burst2.Burst)
		}
		if _, ok := tb.Shift(k); ok != (n > 0) {
			t.Fatalf("key %s: counter %v with %d open", k, ok, n)
		}
	}
}

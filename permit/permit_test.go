package permit

import (
	"errors"
	"math"
	"testing"
)

const (
	us  = int64(1000)
	sec = 1_000_000 * us
)

var lim3 = Limit{MaxInFlight: 3, TTL: 30 * sec}

func id(n byte) ID { return ID{0: 0xa5, 15: n} }

func mustAcquire(t testing.TB, s *Set, now int64, l Limit, n byte, cost int64) Decision {
	t.Helper()
	d, err := s.Acquire(now, l, id(n), cost)
	if err != nil || !d.Allowed {
		t.Fatalf("acquire %d at %d: %+v, %v", n, now, d, err)
	}
	return d
}

func TestSet_Acquire_fillsThenDeniesUntilEarliestExpiry(t *testing.T) {
	var s Set
	mustAcquire(t, &s, 0, lim3, 1, 1)
	mustAcquire(t, &s, 5*sec, lim3, 2, 1)
	if d := mustAcquire(t, &s, 10*sec, lim3, 3, 1); d.Remaining != 0 || d.InFlight != 3 || d.Expiry != 40*sec {
		t.Fatalf("third permit: %+v", d)
	}
	// Permit 1 expires at exactly 30s: live at 30s-1us, gone at 30s.
	steps := []struct {
		now     int64
		allowed bool
		retry   int64
	}{
		{10 * sec, false, 20 * sec},
		{30*sec - us, false, us},
		{30 * sec, true, 0},
		{30 * sec, false, 5 * sec}, // the slot just taken; permit 2 is next, at 35s
		{35*sec - us, false, us},
		{35*sec + us, true, 0},
	}
	for i, st := range steps {
		d, err := s.Acquire(st.now, lim3, id(byte(10+i)), 1)
		if err != nil || d.Allowed != st.allowed || d.RetryAfter != st.retry {
			t.Fatalf("step %d at %dus: %+v, %v; want allowed=%v retry=%dus", i, st.now/us, d, err, st.allowed, st.retry/us)
		}
	}
}

func TestSet_Acquire_costWaitsForEnoughExpiries(t *testing.T) {
	var s Set
	l := Limit{MaxInFlight: 5, TTL: 10 * sec}
	mustAcquire(t, &s, 0, l, 1, 1)          // expires 10s
	mustAcquire(t, &s, 1*sec, l, 2, 1)      // 11s
	mustAcquire(t, &s, 2*sec, l, 3, 2)      // 12s
	d, err := s.Acquire(3*sec, l, id(4), 4) // 1 free, needs 3 more: 1+1+2 by 12s
	if err != nil || d.Allowed || d.RetryAfter != 9*sec || d.Remaining != 1 {
		t.Fatalf("cost 4: %+v, %v", d, err)
	}
	if d, _ := s.Acquire(12*sec-us, l, id(4), 4); d.Allowed || d.RetryAfter != us {
		t.Fatalf("1us early: %+v", d)
	}
	if d, _ := s.Acquire(12*sec, l, id(4), 4); !d.Allowed {
		t.Fatalf("at 12s: %+v", d)
	}
}

func TestSet_Acquire_tooCostly(t *testing.T) {
	var s Set
	d, err := s.Acquire(0, lim3, id(1), 4)
	if err != nil || d.Allowed || !d.TooCostly || d.RetryAfter != 0 || s.Len() != 0 {
		t.Fatalf("%+v, %v", d, err)
	}
}

func TestSet_Acquire_badInputChangesNothing(t *testing.T) {
	var s Set
	mustAcquire(t, &s, 5*sec, lim3, 1, 1)
	bad := []struct {
		l    Limit
		id   ID
		cost int64
		want error
	}{
		{lim3, id(2), 0, ErrInvalidCost},
		{lim3, id(2), -1, ErrInvalidCost},
		{Limit{MaxInFlight: 0, TTL: sec}, id(2), 1, ErrInvalidLimit},
		{Limit{MaxInFlight: MaxInFlight + 1, TTL: sec}, id(2), 1, ErrInvalidLimit},
		{Limit{MaxInFlight: 3, TTL: 0}, id(2), 1, ErrInvalidLimit},
		{Limit{MaxInFlight: 3, TTL: MaxTTL + 1}, id(2), 1, ErrInvalidLimit},
		{lim3, ID{}, 1, ErrInvalidID},
		{lim3, id(1), 1, ErrDuplicateID},
	}
	before, _ := s.MarshalBinary()
	for i, b := range bad {
		if _, err := s.Acquire(6*sec, b.l, b.id, b.cost); !errors.Is(err, b.want) {
			t.Errorf("case %d: %v, want %v", i, err, b.want)
		}
	}
	// A duplicate id is found after the clock moved, which Acquire may
	// remember; nothing else changed.
	after, _ := s.MarshalBinary()
	var a, b Set
	_ = a.UnmarshalBinary(before)
	_ = b.UnmarshalBinary(after)
	if a.Len() != b.Len() || a.InFlight() != b.InFlight() {
		t.Fatalf("bad input changed the set: %x → %x", before, after)
	}
}

func TestSet_Commit_withoutRoom(t *testing.T) {
	var s Set
	for n := range byte(3) {
		mustAcquire(t, &s, 0, lim3, n+1, 1)
	}
	if _, err := s.Commit(sec, lim3, id(9), 1); !errors.Is(err, ErrNoRoom) || s.InFlight() != 3 {
		t.Fatalf("commit on a full set: %v, in flight %d", err, s.InFlight())
	}
}

func TestSet_Check_thenCommitSucceeds(t *testing.T) {
	var s Set
	mustAcquire(t, &s, 0, lim3, 1, 2)
	d, err := s.Check(sec, lim3, 1)
	if err != nil || !d.Allowed || s.InFlight() != 2 {
		t.Fatalf("check: %+v, %v, in flight %d", d, err, s.InFlight())
	}
	if c, err := s.Commit(sec, lim3, id(2), 1); err != nil || c.InFlight != d.InFlight {
		t.Fatalf("commit after check: %+v, %v", c, err)
	}
	if d, _ := s.Check(sec, lim3, 1); d.Allowed || d.RetryAfter != 29*sec {
		t.Fatalf("check on a full set: %+v", d)
	}
}

func TestSet_Release_idempotentAndUnknown(t *testing.T) {
	var s Set
	mustAcquire(t, &s, 0, lim3, 1, 1)
	mustAcquire(t, &s, 0, lim3, 2, 1)
	if !s.Release(sec, id(1)) || s.InFlight() != 1 {
		t.Fatal("first release")
	}
	if s.Release(sec, id(1)) || s.Release(sec, id(7)) || s.InFlight() != 1 {
		t.Fatal("second or unknown release changed something")
	}
	// Permit 2 expires at 30s: released 1us before it counts, at 30s not.
	var e Set
	mustAcquire(t, &e, 0, lim3, 2, 1)
	if !e.Release(30*sec-us, id(2)) {
		t.Fatal("release 1us before expiry")
	}
	if s.Release(30*sec, id(2)) || s.Len() != 0 {
		t.Fatal("release at expiry found the permit")
	}
}

func TestSet_Renew_extendsOnlyLivePermits(t *testing.T) {
	var s Set
	mustAcquire(t, &s, 0, lim3, 1, 1)
	exp, ok, err := s.Renew(30*sec-us, id(1), 30*sec)
	if err != nil || !ok || exp != 60*sec-us {
		t.Fatalf("renew before expiry: %d %v %v", exp, ok, err)
	}
	if _, ok, _ := s.Renew(60*sec-2*us, id(1), 10*sec); !ok {
		t.Fatal("renewed permit expired early")
	}
	if _, ok, _ := s.Renew(70*sec-2*us, id(1), sec); ok || s.Len() != 0 {
		t.Fatal("renew after expiry succeeded")
	}
	if _, _, err := s.Renew(0, id(1), 0); !errors.Is(err, ErrInvalidTTL) {
		t.Fatalf("ttl 0: %v", err)
	}
}

func TestSet_Acquire_clockGoingBackwardsReadsAsLatest(t *testing.T) {
	var s Set
	mustAcquire(t, &s, 10*sec, lim3, 1, 1)
	mustAcquire(t, &s, 10*sec, lim3, 2, 1)
	mustAcquire(t, &s, 50*sec, lim3, 3, 1) // drops 1 and 2 (expired at 40s)
	// A caller 30s behind sees the set as at 50s: 1 and 2 stay gone, and
	// a new permit expires at 50s + ttl, never earlier.
	d := mustAcquire(t, &s, 20*sec, lim3, 4, 1)
	if d.Expiry != 80*sec || d.InFlight != 2 || s.Latest() != 50*sec {
		t.Fatalf("%+v, latest %d", d, s.Latest())
	}
}

func TestSet_Acquire_loweredLimit(t *testing.T) {
	var s Set
	for n := range byte(3) {
		mustAcquire(t, &s, int64(n)*sec, lim3, n+1, 1)
	}
	one := Limit{MaxInFlight: 1, TTL: 30 * sec}
	// Three held, one allowed: a new permit fits once all three expired,
	// the last at 32s.
	d, err := s.Acquire(3*sec, one, id(9), 1)
	if err != nil || d.Allowed || d.Remaining != 0 || d.RetryAfter != 29*sec {
		t.Fatalf("%+v, %v", d, err)
	}
}

func TestSet_Permits_earliestFirst(t *testing.T) {
	var s Set
	mustAcquire(t, &s, 2*sec, lim3, 1, 1)
	mustAcquire(t, &s, 1*sec, lim3, 2, 2) // reads as 2s: same expiry, id order
	got := s.Permits(3 * sec)
	if len(got) != 2 || got[0].ID != id(1) || got[1].ID != id(2) || got[1].Cost != 2 || got[0].Expiry != 32*sec {
		t.Fatalf("%+v", got)
	}
}

func TestSet_Acquire_timeSaturates(t *testing.T) {
	var s Set
	d, err := s.Acquire(math.MaxInt64, lim3, id(1), 1)
	if err != nil || !d.Allowed || d.Expiry != MaxTime+lim3.TTL {
		t.Fatalf("%+v, %v", d, err)
	}
}

func TestSet_Expire_countsOnlyExpiries(t *testing.T) {
	var s Set
	l := Limit{MaxInFlight: 5, TTL: 30 * sec}
	mustAcquire(t, &s, 0, l, 1, 1)
	mustAcquire(t, &s, 0, l, 2, 2)
	mustAcquire(t, &s, sec, l, 3, 1)
	s.Release(2*sec, id(2))
	if n := s.Expire(30*sec - us); n != 0 || s.Len() != 2 {
		t.Fatalf("1us before: %d dropped, %d held", n, s.Len())
	}
	if n := s.Expire(30 * sec); n != 1 || s.Expired() != 1 || s.InFlight() != 1 {
		t.Fatalf("at 30s: %d dropped, %d expired, %d slots", n, s.Expired(), s.InFlight())
	}
	if n := s.Expire(31 * sec); n != 1 || s.Expired() != 2 || s.Len() != 0 {
		t.Fatalf("at 31s: %d dropped, %d expired, %d held", n, s.Expired(), s.Len())
	}
}

// A full key of 1,000 permits: each step releases the oldest and acquires
// a new one, the owner's steady state.
func BenchmarkSet_AcquireRelease(b *testing.B) {
	var s Set
	l := Limit{MaxInFlight: 1000, TTL: 30 * sec}
	var n uint64
	for ; n < 1000; n++ {
		if _, err := s.Acquire(int64(n), l, seqID(n), 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		now := int64(n)
		s.Release(now, seqID(n-1000))
		if d, err := s.Acquire(now, l, seqID(n), 1); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		n++
	}
}

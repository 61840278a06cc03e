package region

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

// sec and us are a second and a microsecond on the package's time base
// (nanoseconds).
const (
	sec = int64(time.Second)
	us  = int64(time.Microsecond)
)

// testConfig: eu and us, a 10% floor, no damping, 4s grants, no grace.
func testConfig() Config {
	c := DefaultConfig("eu", "us")
	c.Floor, c.Damping, c.Grace = Whole/10, 1, 0
	return c
}

// keyHomedIn returns a key whose home is region among cfg's regions.
func keyHomedIn(t *testing.T, cfg Config, region string) string {
	t.Helper()
	return keysHomedIn(t, cfg, region, 1)[0]
}

// keysHomedIn returns n distinct keys whose home is region.
func keysHomedIn(t *testing.T, cfg Config, region string, n int) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < n; i++ {
		if i == 10_000 {
			t.Fatal("too few keys homed in " + region)
		}
		k := fmt.Sprintf("k%d", i)
		if h, _ := HomeOf(k, cfg.Regions); h == region {
			out = append(out, k)
		}
	}
	return out
}

func report(from string, seq uint64, home, key string, demand float64, ack uint64) Report {
	return Report{From: from, Reporter: from + "#1", Home: home, Seq: seq, Items: []Demand{{Key: key, Demand: demand, Ack: ack}}}
}

func mustHandle(t *testing.T, h *Home, now int64, r Report) Share {
	t.Helper()
	rep, err := h.Handle(now, r)
	if err != nil {
		t.Fatal(err)
	}
	if s := h.Reserved(r.Items[0].Key, now); s > Whole {
		t.Fatalf("Σ reserved %d > Whole", s)
	}
	return rep.Grants[0].Share
}

// A region whose share must shrink keeps the larger share reserved until
// it acknowledges the smaller grant; only then does the other region get
// the capacity.
func TestHome_Handle_decreasesBeforeIncreases(t *testing.T) {
	cfg := testConfig()
	key := keyHomedIn(t, cfg, "eu")
	h, _ := NewHome(cfg, "eu", 0)
	now := 5 * sec // past the start-up quiet period

	steps := []struct {
		r    Report
		want Share
	}{
		{report("eu", 1, "eu", key, 2, 0), 900_000}, // us silent: floor + all the spare
		{report("us", 1, "eu", key, 2, 0), 100_000}, // wants 500,000; eu holds 900,000
		{report("eu", 2, "eu", key, 2, 1), 500_000}, // eu shrinks to its target...
		{report("us", 2, "eu", key, 2, 0), 100_000}, // ...but still holds grant 1
		{report("eu", 3, "eu", key, 2, 2), 500_000}, // eu acknowledges grant 2
		{report("us", 3, "eu", key, 2, 1), 500_000}, // now us grows
	}
	for i, s := range steps {
		if got := mustHandle(t, h, now, s.r); got != s.want {
			t.Fatalf("step %d (%s seq %d): granted %d, want %d", i, s.r.From, s.r.Seq, got, s.want)
		}
		now += 100_000 * us
	}
}

// A grant holds its capacity for TTL + Grace from when it was made, not a
// nanosecond less; a region silent that long wants nothing.
func TestHome_Handle_expiry(t *testing.T) {
	cfg := testConfig()
	cfg.Grace = 20 * time.Millisecond
	key := keyHomedIn(t, cfg, "us")
	h, _ := NewHome(cfg, "us", 0)
	t0 := 10 * sec
	if got := mustHandle(t, h, t0, report("eu", 1, "us", key, 2, 0)); got != 900_000 {
		t.Fatalf("eu granted %d", got)
	}
	end := t0 + cfg.ttl() + cfg.grace()
	if got := mustHandle(t, h, end-1, report("us", 1, "us", key, 2, 0)); got != 100_000 {
		t.Fatalf("1ns before eu's grant ends: us granted %d, want 100000", got)
	}
	if got := mustHandle(t, h, end, report("us", 2, "us", key, 2, 1)); got != 900_000 {
		t.Fatalf("when eu's grant ends: us granted %d, want 900000", got)
	}
}

// A home grants nothing above the floors until every grant a previous
// incarnation (or a previous owner of an adopted key) made has expired.
func TestHome_quietPeriods(t *testing.T) {
	cfg := testConfig()
	key := keyHomedIn(t, cfg, "eu")
	start := 100 * sec
	h, _ := NewHome(cfg, "eu", start)
	quiet := start + cfg.ttl() + cfg.grace()
	if got := mustHandle(t, h, quiet-1, report("eu", 1, "eu", key, 2, 0)); got != cfg.Floor {
		t.Fatalf("during the start-up quiet period: granted %d", got)
	}
	if got := mustHandle(t, h, quiet, report("eu", 2, "eu", key, 2, 1)); got != 900_000 {
		t.Fatalf("after it: granted %d", got)
	}
	h.Adopt(key, quiet)
	if got := mustHandle(t, h, quiet+1, report("eu", 3, "eu", key, 2, 2)); got != cfg.Floor {
		t.Fatalf("after Adopt: granted %d", got)
	}
}

// A report overtaken by a newer one from the same process does not bring
// back the demand it carried.
func TestHome_Handle_lateReportKeepsNewerDemand(t *testing.T) {
	cfg := testConfig()
	key := keyHomedIn(t, cfg, "eu")
	h, _ := NewHome(cfg, "eu", 0)
	now := 5 * sec
	mustHandle(t, h, now, report("us", 5, "eu", key, 0, 0))
	mustHandle(t, h, now, report("us", 4, "eu", key, 2, 0)) // late
	st := h.Stats(now, func(string) string { return "l" })["l"]
	if st.Demand["us"] != 0 {
		t.Fatalf("us demand %v after a late report, want 0", st.Demand["us"])
	}
}

func TestHome_Handle_badReportChangesNothing(t *testing.T) {
	cfg := testConfig()
	key := keyHomedIn(t, cfg, "eu")
	other := keyHomedIn(t, cfg, "us")
	h, _ := NewHome(cfg, "eu", 0)
	now := 5 * sec
	mustHandle(t, h, now, report("eu", 1, "eu", key, 2, 0))
	before := h.Reserved(key, now)
	dup := report("us", 2, "eu", key, 1, 0)
	dup.Items = append(dup.Items, dup.Items[0])
	noReporter := report("us", 2, "eu", key, 1, 0)
	noReporter.Reporter = ""
	bad := []Report{
		report("us", 2, "us", key, 1, 0),          // addressed to another home
		report("xx", 2, "eu", key, 1, 0),          // unknown region
		report("us", 2, "eu", other, 1, 0),        // key homed elsewhere
		report("us", 2, "eu", key, math.NaN(), 0), // demand not a number
		report("us", 2, "eu", key, -1, 0),         // negative demand
		report("us", 2, "eu", key, math.Inf(1), 0),
		dup, noReporter,
	}
	for i, r := range bad {
		if _, err := h.Handle(now, r); !errors.Is(err, ErrInvalidReport) {
			t.Errorf("case %d: error %v, want ErrInvalidReport", i, err)
		}
	}
	if h.Keys() != 1 || h.Reserved(key, now) != before {
		t.Fatalf("bad reports changed the ledger: %d keys, reserved %d (was %d)", h.Keys(), h.Reserved(key, now), before)
	}
}

func TestHome_Sweep(t *testing.T) {
	cfg := testConfig()
	key := keyHomedIn(t, cfg, "eu")
	h, _ := NewHome(cfg, "eu", 0)
	now := 5 * sec
	mustHandle(t, h, now, report("eu", 1, "eu", key, 2, 0))
	h.Sweep(now + cfg.ttl() - 1)
	if h.Keys() != 1 || h.Reserved(key, now+cfg.ttl()-1) != Whole {
		t.Fatal("Sweep dropped a live grant")
	}
	h.Sweep(now + cfg.ttl() + 1)
	if h.Keys() != 0 {
		t.Fatalf("Sweep kept %d keys after their grants expired", h.Keys())
	}
}

func TestNewHome_rejectsAStranger(t *testing.T) {
	if _, err := NewHome(testConfig(), "ap", 0); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("error %v, want ErrInvalidConfig", err)
	}
}

func TestHome_Moved_quietForKeysItDidNotKeep(t *testing.T) {
	cfg := testConfig()
	ks := keysHomedIn(t, cfg, "eu", 2)
	kept, lost := ks[0], ks[1]
	start := cfg.TTL.Nanoseconds() // past the start-up quiet period
	h, err := NewHome(cfg, "eu", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := Whole - cfg.Floor // us alone asks: it gets all but eu's floor
	if s := mustHandle(t, h, start, report("us", 1, "eu", kept, 0.5, 0)); s != want {
		t.Fatalf("grant before the move = %d, want %d", s, want)
	}
	mustHandle(t, h, start, report("us", 2, "eu", lost, 0.5, 0))
	moved := start + sec
	h.Moved(moved, func(k string) bool { return k == kept })
	if h.Keys() != 1 {
		t.Fatalf("keys after Moved = %d, want 1 (the lost key forgotten)", h.Keys())
	}
	quietEnd := moved + cfg.TTL.Nanoseconds() + cfg.Grace.Nanoseconds()
	// The kept key goes on being granted; the lost key, back again, and a
	// key never seen are held to the floor until TTL + Grace after Moved.
	if s := mustHandle(t, h, moved, report("us", 3, "eu", kept, 0.5, 1)); s != want {
		t.Errorf("kept key's grant after the move = %d, want %d", s, want)
	}
	if s := mustHandle(t, h, quietEnd-1, report("us", 4, "eu", lost, 0.5, 0)); s != cfg.Floor {
		t.Errorf("returned key's grant 1ns before the quiet end = %d, want the floor %d", s, cfg.Floor)
	}
	if s := mustHandle(t, h, quietEnd, report("us", 5, "eu", lost, 0.5, 4)); s != want {
		t.Errorf("returned key's grant at the quiet end = %d, want %d", s, want)
	}
}

func TestHome_Check_matchesHandle(t *testing.T) {
	cfg := testConfig()
	h, err := NewHome(cfg, "eu", 0)
	if err != nil {
		t.Fatal(err)
	}
	bad := report("us", 1, "eu", keyHomedIn(t, cfg, "us"), 0.5, 0)
	if err := h.Check(bad); !errors.Is(err, ErrInvalidReport) {
		t.Fatalf("Check(key homed elsewhere) = %v, want ErrInvalidReport", err)
	}
	if err := h.Check(report("us", 1, "eu", keyHomedIn(t, cfg, "eu"), 0.5, 0)); err != nil {
		t.Fatalf("Check(valid) = %v", err)
	}
	if h.Keys() != 0 {
		t.Fatalf("Check changed the home: %d keys", h.Keys())
	}
}

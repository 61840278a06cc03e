package region

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
)

func TestShare_Limit(t *testing.T) {
	g := gcra.Limit{Interval: int64(time.Millisecond), Burst: 100} // 1000/s, burst 100
	cases := []struct {
		s    Share
		want gcra.Limit
		ok   bool
	}{
		{Whole, g, true},
		{Whole / 2, gcra.Limit{Interval: 2_000_000, Burst: 50}, true},
		{Whole / 3, gcra.Limit{Interval: 3_000_004, Burst: 33}, true}, // interval up (from 3,000,003.000003ns), burst down
		{Whole / 100, gcra.Limit{Interval: 100_000_000, Burst: 1}, true},
		{Whole/100 - 1, gcra.Limit{}, false}, // burst rounds to 0
		{0, gcra.Limit{}, false},
		{-1, gcra.Limit{}, false},
		{Whole + 1, gcra.Limit{}, false},
	}
	for _, c := range cases {
		got, ok := c.s.Limit(g)
		if got != c.want || ok != c.ok {
			t.Errorf("Share(%d).Limit = %+v, %v; want %+v, %v", c.s, got, ok, c.want, c.ok)
		}
	}
}

// Limits of shares summing to at most Whole never admit more, together,
// than the global rate and burst.
func TestShare_Limit_sumWithinGlobal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		g := gcra.Limit{Interval: 1 + rng.Int64N(int64(time.Second)), Burst: 1 + rng.Int64N(10_000)} // 1ns to 1s
		left := Whole
		var rate float64
		var burst int64
		for range 1 + rng.IntN(6) {
			s := Share(rng.Int64N(int64(left) + 1))
			left -= s
			if l, ok := s.Limit(g); ok {
				rate += 1 / float64(l.Interval)
				burst += l.Burst
			}
		}
		if burst > g.Burst || rate > 1/float64(g.Interval)*(1+1e-12) {
			t.Fatalf("limit %+v: shares admit rate %v burst %d", g, rate, burst)
		}
	}
}

func TestRescale(t *testing.T) {
	small := gcra.Limit{Interval: 10_000 * us, Burst: 10} // 100/s
	big := gcra.Limit{Interval: 1_000 * us, Burst: 100}   // 1000/s
	const now = 1_000_000 * us
	cases := []struct {
		name     string
		tat      int64
		from, to gcra.Limit
		want     int64
	}{
		{"same limit keeps the TAT", now + 12_345*us, small, small, now + 12_345*us},
		// Level 10 (rested) stays 10 of 100: 90 units of debt at 1ms.
		{"growing rested: room, not units", now - 5*us, small, big, now + 90_000*us},
		// Level 4 (6 used) stays 4: 96 units of debt.
		{"growing part-used", now + 60_000*us, small, big, now + 96_000*us},
		{"growing empty stays empty", now + 100_000*us, small, big, now + 100_000*us},
		// Level 100 is cut to 10: rested.
		{"shrinking rested", now, big, small, now},
		// Level 95 is cut to 10.
		{"shrinking part-used above new burst", now + 5_000*us, big, small, now},
		// Level 3 stays 3: 7 units of debt at 10ms.
		{"shrinking part-used below new burst", now + 97_000*us, big, small, now + 70_000*us},
		{"TAT beyond the span counts as empty", now + 10*small.Span(), small, big, now + big.Span()},
	}
	for _, c := range cases {
		if got := Rescale(c.tat, now, c.from, c.to); got != c.want {
			t.Errorf("%s: Rescale(%d) = now%+d, want now%+d", c.name, c.tat-now, got-now, c.want-now)
		}
	}
}

// After a rescale the key admits exactly its kept level at once.
func TestRescale_admitsTheKeptLevel(t *testing.T) {
	small := gcra.Limit{Interval: 10_000 * us, Burst: 10}
	big := gcra.Limit{Interval: 1_000 * us, Burst: 100}
	tat := Rescale(0, 0, small, big) // rested at 10 of 10
	n := 0
	for {
		r, _ := gcra.Decide(tat, 0, big, 1)
		if !r.Allowed {
			break
		}
		tat, n = r.TAT, n+1
	}
	if n != 10 {
		t.Fatalf("admitted %d at once after growing, want the 10 it had", n)
	}
}

func TestHomeOf(t *testing.T) {
	regions := []string{"ap", "eu", "us"}
	counts := map[string]int{}
	for i := range 3000 {
		key := "k" + string(rune('a'+i%26)) + string(rune(i))
		h, err := HomeOf(key, regions)
		if err != nil {
			t.Fatal(err)
		}
		rev := slices.Clone(regions)
		slices.Reverse(rev)
		if h2, _ := HomeOf(key, rev); h2 != h {
			t.Fatalf("%q: home %s depends on order (%s)", key, h, h2)
		}
		// Removing a region moves only the keys it was home of.
		if h != "us" {
			if h3, _ := HomeOf(key, []string{"ap", "eu"}); h3 != h {
				t.Fatalf("%q moved from %s to %s when us left", key, h, h3)
			}
		}
		counts[h]++
	}
	for _, r := range regions {
		if counts[r] < 800 {
			t.Errorf("region %s is home of %d of 3000 keys", r, counts[r])
		}
	}
	for _, bad := range [][]string{nil, {"eu", "eu"}, {"eu", ""}} {
		if _, err := HomeOf("k", bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("HomeOf(%q) error %v, want ErrInvalidConfig", bad, err)
		}
	}
}

func TestTargets(t *testing.T) {
	cases := []struct {
		name   string
		demand []float64
		floor  Share
		want   []Share
	}{
		// 0.02 + 0.96 × 1.78/1.96 and 0.02 + 0.96 × 0.18/1.96
		{"over-subscribed: floor plus spare by demand above it", []float64{1.8, 0.2}, 20_000, []Share{891_836, 108_163}},
		{"exactly the limit", []float64{0.9, 0.1}, 20_000, []Share{900_000, 100_000}},
		{"room left goes by demand", []float64{0.3, 0.1}, 0, []Share{750_000, 250_000}},
		{"no demand: even", []float64{0, 0}, 100_000, []Share{500_000, 500_000}},
		{"idle region keeps its floor", []float64{2, 0, 0}, 50_000, []Share{900_000, 50_000, 50_000}},
	}
	for _, c := range cases {
		got := Targets(c.demand, c.floor)
		var sum Share
		for i := range got {
			sum += got[i]
			if d := got[i] - c.want[i]; d < -1 || d > 1 {
				t.Errorf("%s: Targets = %v, want %v", c.name, got, c.want)
				break
			}
		}
		if sum > Whole {
			t.Errorf("%s: Σ targets %d > Whole", c.name, sum)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	ok := DefaultConfig("eu", "us")
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Regions = nil },
		func(c *Config) { c.Regions = []string{"eu", "eu"} },
		func(c *Config) { c.Floor = Whole/2 + 1 },
		func(c *Config) { c.Floor = -1 },
		func(c *Config) { c.Interval = 0 },
		func(c *Config) { c.TTL = c.Interval },
		func(c *Config) { c.Grace = -1 },
		func(c *Config) { c.Damping = 0 },
		func(c *Config) { c.Damping = 1.5 },
	}
	for i, f := range bad {
		c := DefaultConfig("eu", "us")
		f(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: Validate = %v, want ErrInvalidConfig", i, err)
		}
	}
}

package region

import (
	"math/rand/v2"
	"testing"

	"github.com/weirhq/weir/gcra"
)

// TestConfig_Limit_burstsOfSharesSumToAtMostTheGlobalBurst: for random
// regions, floors, bursts and shares (each at least the floor, together at
// most Whole), the bursts of the shares' limits sum to at most the global
// burst and their rates to at most the global rate: the two terms of
// G·W + B.
func TestConfig_Limit_burstsOfSharesSumToAtMostTheGlobalBurst(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		n := 1 + rng.IntN(6)
		cfg := DefaultConfig([]string{"a", "b", "c", "d", "e", "f"}[:n]...)
		cfg.Floor = Share(rng.Int64N(int64(Whole)/int64(n) + 1))
		g := gcra.Limit{Interval: 1 + rng.Int64N(1e9), Burst: 1 + rng.Int64N(200)}
		shares := make([]Share, n)
		left := Whole - Share(n)*cfg.Floor
		for i := range shares {
			extra := Share(rng.Int64N(int64(left) + 1))
			if i == n-1 && rng.IntN(2) == 0 {
				extra = left // often the whole spare
			}
			shares[i], left = cfg.Floor+extra, left-extra
		}
		var bursts int64
		var rate float64
		for _, s := range shares {
			if lim, ok := cfg.Limit(s, g); ok {
				bursts += lim.Burst
				rate += 1 / float64(lim.Interval)
			}
		}
		if bursts > g.Burst || rate > 1/float64(g.Interval)*(1+1e-9) {
			t.Fatalf("%d regions, floor %d, limit %+v, shares %v: Σ bursts %d, Σ rates %v (global %v)",
				n, cfg.Floor, g, shares, bursts, rate, 1/float64(g.Interval))
		}
	}
}

// TestConfig_Limit_floorsHoldAUnitWheneverEveryRegionCan: with the default
// 2% floor, a floor of burst 10 rounds down to no unit; the unit rule gives
// each of two regions' floors one, and the rest go with the share above
// the floor. A burst below the number of regions gives the floors none.
func TestConfig_Limit_floorsHoldAUnitWheneverEveryRegionCan(t *testing.T) {
	g := gcra.Limit{Interval: 10_000_000, Burst: 10} // 100/s burst 10
	two := DefaultConfig("eu", "us")
	for _, tc := range []struct {
		cfg   Config
		share Share
		burst int64 // 0: admits nothing
	}{
		{two, two.Floor, 1},
		{two, Whole / 2, 5},
		{two, Whole - two.Floor, 9},
		{DefaultConfig("eu", "us", "ap"), Whole / 3, 3},
	} {
		lim, ok := tc.cfg.Limit(tc.share, g)
		if ok != (tc.burst > 0) || lim.Burst != tc.burst {
			t.Errorf("%d regions, share %d of burst 10: %+v %v, want burst %d", len(tc.cfg.Regions), tc.share, lim, ok, tc.burst)
		}
	}
	one := gcra.Limit{Interval: 10_000_000, Burst: 1}
	if _, ok := two.Limit(two.Floor, one); ok {
		t.Error("floor of burst 1 over two regions admits")
	}
	if lim, ok := two.Limit(Whole/2, one); ok {
		t.Errorf("half of burst 1 over two regions: %+v, want nothing (the other half could hold the unit too)", lim)
	}
	if lim, ok := two.Limit(Whole/2+1, one); !ok || lim.Burst != 1 {
		t.Errorf("over half of burst 1: %+v %v, want the unit", lim, ok)
	}
}

// TestConfig_Admits: a fast limit admits somewhere as long as one region
// can hold a unit, at every floor when B ≥ R; a strict one only when its
// fixed 1/R holds a unit.
func TestConfig_Admits(t *testing.T) {
	three := DefaultConfig("eu", "us", "ap")
	for _, tc := range []struct {
		cfg            Config
		burst          int64
		strict         bool
		some, atFloors bool
	}{
		{three, 1, false, true, false},
		{three, 2, false, true, false},
		{three, 3, false, true, true},
		{three, 2, true, false, false},
		{three, 3, true, true, true},
		{Config{Regions: []string{"eu", "us"}, Floor: Whole / 2}, 1, false, false, false},
	} {
		some, floors := tc.cfg.Admits(gcra.Limit{Interval: 1_000_000, Burst: tc.burst}, tc.strict)
		if some != tc.some || floors != tc.atFloors {
			t.Errorf("%d regions floor %d burst %d strict %v: admits %v at floors %v, want %v %v",
				len(tc.cfg.Regions), tc.cfg.Floor, tc.burst, tc.strict, some, floors, tc.some, tc.atFloors)
		}
	}
}

// TestHome_SetBursts_unitsGoToTheBusiestRegions: with a burst of 1 over two
// regions of equal demand, the plain targets (half each) admit nothing;
// with the bursts known, the home gives one region the unit, and keeps it
// there while demand stays equal.
func TestHome_SetBursts_unitsGoToTheBusiestRegions(t *testing.T) {
	cfg := DefaultConfig("eu", "us")
	cfg.Damping = 1
	key := "k"
	home, _ := HomeOf(key, cfg.Regions)
	h, err := NewHome(cfg, home, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.SetBursts(func(string) int64 { return 1 })
	one := gcra.Limit{Interval: 1_000_000, Burst: 1}
	now := cfg.ttl() + cfg.grace() // past the quiet period
	var last map[string]Share
	for round := range 6 {
		last = map[string]Share{}
		for i, from := range cfg.Regions {
			rep, err := h.Handle(now, Report{From: from, Reporter: from, Home: home, Seq: uint64(round*2 + i + 1),
				Items: []Demand{{Key: key, Demand: 1, Ack: uint64(max(0, round*2+i-1))}}})
			if err != nil {
				t.Fatal(err)
			}
			last[from] = rep.Grants[0].Share
		}
		now += int64(cfg.Interval)
	}
	admitting := 0
	for _, s := range last {
		if _, ok := cfg.Limit(s, one); ok {
			admitting++
		}
	}
	if admitting != 1 || h.Reserved(key, now) > Whole {
		t.Fatalf("grants %v: %d regions hold the unit, want 1 (reserved %d)", last, admitting, h.Reserved(key, now))
	}
}

package ring

import (
	"fmt"
	"math"
	"testing"
)

// These tests measure how groups spread and move. Hashing is deterministic,
// so each run computes the same figures; the tolerances say what the
// algorithm promises, not what one seed happened to give, and the comments
// record what was measured.

func seq(format string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i+1)
	}
	return out
}

func build0(t *testing.T, members []string) *snapshot {
	t.Helper()
	s, err := build(DefaultConfig(), normalize(members))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// partitionCap is the most partitions consistent lets one member own:
// ceil(floor(P/N) * Load).
func partitionCap(cfg Config, n int) int {
	return int(math.Ceil(float64(cfg.PartitionCount/n) * cfg.Load))
}

// TestRing_Owner_spread checks every member's share of groups.
//
// Tolerances, for N members and k groups, with share p_i = a member's
// fraction of partitions:
//   - partitions: bounded load caps every p_i at ceil(floor(P/N)*Load)/P,
//     about 1.25/N; this is exact and asserted as such.
//   - 10000 groups: each member's count lies in [0.7, 1.3] * k/N. The top
//     is the load cap plus three standard deviations of binomial sampling
//     (~0.03 * k/N at N=10). The bottom is about 2.4 standard deviations of
//     the arc a member's 64 virtual nodes cover (relative sd ~ 1/sqrt(64)).
//     Measured: N=3 0.960..1.068, N=10 0.873..1.242.
//   - 30 groups (chaos:1..30): too few for a fair-share bound. Each count
//     is at most k*Load/N + 3 binomial sd, and with N=3 every member owns at
//     least one. Measured: N=3 4..14 (ideal 10); N=10 0..8 (ideal 3) — with
//     a mean of 3 a member owning none is expected (~5% each), so no lower
//     bound is asserted at N=10.
func TestRing_Owner_spread(t *testing.T) {
	cfg := DefaultConfig()
	for _, n := range []int{3, 10} {
		members := seq("node-%d", n)
		s := build0(t, members)
		perPartition := map[string]int{}
		for _, o := range s.owners {
			perPartition[o]++
		}
		for _, m := range members {
			if perPartition[m] > partitionCap(cfg, n) {
				t.Errorf("N=%d: %s owns %d partitions, cap %d", n, m, perPartition[m], partitionCap(cfg, n))
			}
		}
		for _, set := range []struct {
			format string
			k      int
			lo, hi float64 // bounds on count / (k/N)
		}{
			{"tenant-%04d", 10000, 0.7, 1.3},
			{"chaos:%d", 30, lowerSmall(n, 30), upperSmall(cfg, n, 30)},
		} {
			counts := spread(t, members, seq(set.format, set.k))
			lo, hi := minMax(counts, members)
			fair := float64(set.k) / float64(n)
			t.Logf("N=%d %s x%d: min %d max %d (fair %.1f, ratio %.3f..%.3f)",
				n, set.format, set.k, lo, hi, fair, float64(lo)/fair, float64(hi)/fair)
			if float64(lo) < set.lo*fair || float64(hi) > set.hi*fair {
				t.Errorf("N=%d %s: counts %d..%d outside [%.2f, %.2f]*%.1f",
					n, set.format, lo, hi, set.lo, set.hi, fair)
			}
		}
	}
}

func lowerSmall(n, k int) float64 {
	if n == 3 {
		return 1 / (float64(k) / float64(n)) // at least one group each
	}
	return 0
}

func upperSmall(cfg Config, n, k int) float64 {
	p := cfg.Load / float64(n)
	mean := float64(k) * p
	return (mean + 3*math.Sqrt(mean*(1-p))) / (float64(k) / float64(n))
}

func spread(t *testing.T, members, groups []string) map[string]int {
	r, err := New(DefaultConfig(), members...)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, g := range groups {
		o, _ := r.Owner(g)
		counts[o]++
	}
	return counts
}

func minMax(counts map[string]int, members []string) (lo, hi int) {
	lo = math.MaxInt
	for _, m := range members {
		lo, hi = min(lo, counts[m]), max(hi, counts[m])
	}
	return lo, hi
}

// TestRing_Set_movesAboutOneNth removes each member of N in turn, and adds
// a newcomer, and counts the partitions whose owner changes.
//
// Asserted: the moved fraction is at most 1.5/N, and "collateral" moves (a
// partition moving between two members that both stay) are at most 0.25/N.
// Plain consistent hashing would have no collateral moves; bounded load can
// cascade a few when the cap changes with N. Measured with node-1..node-N,
// N=3 and N=10 over every removal and five additions: worst moved 1.231/N
// (remove, N=10) and 1.175/N (add, N=3); worst collateral 20 of 2039
// partitions = 0.098/N (remove, N=10); none at N=3. Across N=2..12 and
// other naming schemes the worst seen was 1.37/N moved, 38 collateral.
func TestRing_Set_movesAboutOneNth(t *testing.T) {
	for _, n := range []int{3, 10} {
		members := seq("node-%d", n)
		before := build0(t, members)
		worstMoved, worstCollateral := 0.0, 0.0
		for i, gone := range members {
			rest := append(append([]string{}, members[:i]...), members[i+1:]...)
			moved, collateral := diff(before, build0(t, rest), gone, "")
			worstMoved, worstCollateral = max(worstMoved, moved*float64(n)), max(worstCollateral, collateral*float64(n))
			checkMoves(t, fmt.Sprintf("N=%d remove %s", n, gone), n, moved, collateral)
		}
		for i := range 5 {
			extra := fmt.Sprintf("extra-%d", i)
			moved, collateral := diff(before, build0(t, append(members[:n:n], extra)), "", extra)
			worstMoved, worstCollateral = max(worstMoved, moved*float64(n+1)), max(worstCollateral, collateral*float64(n+1))
			checkMoves(t, fmt.Sprintf("N=%d add %s", n, extra), n+1, moved, collateral)
		}
		t.Logf("N=%d: worst moved %.3f/N, worst collateral %.3f/N", n, worstMoved, worstCollateral)
	}
}

func checkMoves(t *testing.T, what string, n int, moved, collateral float64) {
	t.Helper()
	if moved > 1.5/float64(n) {
		t.Errorf("%s: moved %.4f of partitions, want <= 1.5/%d", what, moved, n)
	}
	if collateral > 0.25/float64(n) {
		t.Errorf("%s: %.4f of partitions moved between surviving members, want <= 0.25/%d", what, collateral, n)
	}
}

// diff returns the fraction of partitions whose owner changed, and the
// fraction that moved neither away from gone nor onto added.
func diff(a, b *snapshot, gone, added string) (moved, collateral float64) {
	var m, c int
	for p := range a.owners {
		if a.owners[p] == b.owners[p] {
			continue
		}
		m++
		if a.owners[p] != gone && b.owners[p] != added {
			c++
		}
	}
	total := float64(len(a.owners))
	return float64(m) / total, float64(c) / total
}

// TestRing_Set_groupsFollowPartitions checks the same on groups rather than
// partitions: removing node-3 of three moves node-3's groups and no others
// (no collateral moves at N=3, as measured above), about 1/3 of them.
// Measured: 0.3560 of 10000 groups.
func TestRing_Set_groupsFollowPartitions(t *testing.T) {
	members := seq("node-%d", 3)
	groups := seq("tenant-%04d", 10000)
	before, after := groupOwners(t, members, groups), groupOwners(t, members[:2], groups)
	moved := 0
	for _, g := range groups {
		if before[g] == after[g] {
			continue
		}
		moved++
		if before[g] != "node-3" {
			t.Errorf("%s moved %s -> %s, though both stay", g, before[g], after[g])
		}
	}
	frac := float64(moved) / float64(len(groups))
	t.Logf("removing 1 of 3 moved %.4f of %d groups", frac, len(groups))
	if frac > 1.5/3 {
		t.Errorf("moved %.4f, want <= 0.5", frac)
	}
}

func groupOwners(t *testing.T, members, groups []string) map[string]string {
	r, err := New(DefaultConfig(), members...)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(groups))
	for _, g := range groups {
		out[g], _ = r.Owner(g)
	}
	return out
}

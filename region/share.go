package region

import (
	"fmt"
	"hash/fnv"
	"math/big"
	"slices"

	"github.com/weirhq/weir/gcra"
)

// Share is a part of a global limit, in millionths: Whole is the whole
// limit (its rate and its burst), Whole/10 a tenth of both. Shares are
// integers so that the invariant Σ shares ≤ Whole is checked exactly.
type Share int64

// Whole is the share that stands for the entire global limit.
const Whole Share = 1_000_000

// Fraction returns s as a fraction of the whole limit (1 = all of it).
func (s Share) Fraction() float64 { return float64(s) / float64(Whole) }

// Limit returns share s of the global limit g split in proportion: the
// interval rounded up and the burst rounded down (⌊s·B⌋), so that the
// limits of shares summing to at most Whole admit together at most g's rate
// and g's burst. ok is false when s is not positive, exceeds Whole, or its
// part of the burst rounds down to zero units: such a share admits nothing.
// g must be a valid limit. Regions enforce Config.Limit, which splits the
// burst by the unit rule instead, so that small bursts still admit.
func (s Share) Limit(g gcra.Limit) (lim gcra.Limit, ok bool) {
	if s <= 0 || s > Whole {
		return gcra.Limit{}, false
	}
	burst := mulDiv(g.Burst, int64(s), int64(Whole), false)
	if burst < 1 {
		return gcra.Limit{}, false
	}
	iv := mulDiv(g.Interval, int64(Whole), int64(s), true)
	lim = gcra.Limit{Interval: iv, Burst: burst}
	if lim.Validate() != nil {
		return gcra.Limit{}, false
	}
	return lim, true
}

// mulDiv returns a*b/c rounded down (or up), a, b >= 0, c > 0, saturating
// at gcra.MaxSpan.
func mulDiv(a, b, c int64, up bool) int64 {
	p := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	q, r := new(big.Int).QuoRem(p, big.NewInt(c), new(big.Int))
	if up && r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() > gcra.MaxSpan {
		return gcra.MaxSpan
	}
	return q.Int64()
}

// Rescale returns the TAT a key must take at now when its limit changes
// from one share's limit to another's, so that the units the key may admit
// at once (its bucket level) are kept, and cut to the new burst when that
// is smaller. It never resets the key: a region whose share shrinks loses
// the headroom above its new burst, one whose share grows gains rate and
// room to refill, not units. Rounding only ever lowers the level. Both
// limits must be valid.
//
// Keeping the level, not the TAT, is what keeps the regions together within
// the global bound: the sum of the levels never exceeds the sum of the
// bursts, which never exceeds the global burst.
func Rescale(tat, now int64, from, to gcra.Limit) int64 {
	if from == to {
		return tat
	}
	debt := max(0, tat-now)       // time the bucket is "behind"
	debt = min(debt, from.Span()) // a valid TAT is never further ahead
	level := from.Span() - debt   // level × from.Interval
	// new debt = to.Burst×to.Interval − level×to.Interval/from.Interval
	scaled := new(big.Int).Mul(big.NewInt(level), big.NewInt(to.Interval))
	scaled.Quo(scaled, big.NewInt(from.Interval))
	span := big.NewInt(to.Span())
	if scaled.Cmp(span) >= 0 {
		return now // the level is at least the new burst: rested
	}
	return now + span.Sub(span, scaled).Int64()
}

// HomeOf returns the home region of key among regions: the region whose
// hash of (region name, key) is highest (rendezvous hashing). The result
// does not depend on the order of regions, and adding or removing a region
// moves only the keys whose home it is or becomes. It returns an error if
// regions is empty or names a region twice.
func HomeOf(key string, regions []string) (string, error) {
	if err := checkRegions(regions); err != nil {
		return "", err
	}
	var best string
	var bestH uint64
	for _, r := range regions {
		h := fnv.New64a()
		h.Write([]byte(r))
		h.Write([]byte{0})
		h.Write([]byte(key))
		if v := mix(h.Sum64()); best == "" || v > bestH || (v == bestH && r < best) {
			best, bestH = r, v
		}
	}
	return best, nil
}

// mix is the splitmix64 finaliser: FNV alone spreads short keys unevenly
// over a few similar region names.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func checkRegions(regions []string) error {
	if len(regions) == 0 {
		return fmt.Errorf("%w: no regions", ErrInvalidConfig)
	}
	s := slices.Clone(regions)
	slices.Sort(s)
	for i, r := range s {
		if r == "" {
			return fmt.Errorf("%w: empty region name", ErrInvalidConfig)
		}
		if i > 0 && s[i-1] == r {
			return fmt.Errorf("%w: region %q named twice", ErrInvalidConfig, r)
		}
	}
	return nil
}

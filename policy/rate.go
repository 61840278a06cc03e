package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/gcra"
)

// Rate is a sustained allowance: N units every Per.
type Rate struct {
	N   int64
	Per time.Duration
}

// maxPerSecond is the fastest rate a policy accepts: one unit per
// microsecond. Every accepted rate is enforced within 0.1 % (gcra's
// intervals are whole nanoseconds, rounded up).
const maxPerSecond = 1_000_000

// ParseRate parses "N/s", "N/m", "N/h" or "N/d" with N a positive decimal integer.
// No other unit is accepted and the unit is required. Rates faster than one
// unit per microsecond (1000000/s) are refused. Errors wrap ErrInvalid.
func ParseRate(s string) (Rate, error) {
	r, msg := parseRate(s)
	if msg != "" {
		return Rate{}, &invalidError{msg: "policy: rate " + msg}
	}
	return r, nil
}

// parseRate returns a message such as `"5/x" is not N/s, N/m, N/h or N/d` instead
// of an error so Parse can place it after the field it came from.
func parseRate(s string) (Rate, string) {
	num, unit, ok := strings.Cut(s, "/")
	var per time.Duration
	switch unit {
	case "s":
		per = time.Second
	case "m":
		per = time.Minute
	case "h":
		per = time.Hour
	case "d":
		per = 24 * time.Hour
	default:
		ok = false
	}
	if !ok || num == "" || strings.TrimLeft(num, "0123456789") != "" {
		return Rate{}, fmt.Sprintf("%q is not N/s, N/m, N/h or N/d", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	switch {
	case err != nil:
		return Rate{}, fmt.Sprintf("%q: %s is too large", s, num)
	case n == 0:
		return Rate{}, fmt.Sprintf("%q: N must be positive", s)
	case n > maxPerSecond*int64(per/time.Second):
		return Rate{}, fmt.Sprintf("%q is faster than %d/s, one per microsecond", s, maxPerSecond)
	}
	return Rate{N: n, Per: per}, ""
}

// String formats r as ParseRate accepts it, e.g. "5/s". A Per other than a
// second, minute or hour (only possible for a hand-built Rate) is written as
// a Go duration, e.g. "5/10s".
func (r Rate) String() string {
	var unit string
	switch r.Per {
	case time.Second:
		unit = "s"
	case time.Minute:
		unit = "m"
	case time.Hour:
		unit = "h"
	case 24 * time.Hour:
		unit = "d"
	default:
		unit = r.Per.String()
	}
	return strconv.FormatInt(r.N, 10) + "/" + unit
}

// Limit builds the GCRA limit "r with this burst" with gcra.PerPeriod. It
// does not apply the policy's ranges (see CheckParams).
func (r Rate) Limit(burst int64) (gcra.Limit, error) {
	return gcra.PerPeriod(r.N, r.Per, burst)
}

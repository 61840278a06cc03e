package envoyimport

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// maxRequests keeps an imported rate within what a weir policy accepts (one
// unit per microsecond at most; see policy.ParseRate).
const maxRequests = 1_000_000

// Weir limit names: [A-Za-z0-9_.-]{1,64}.
var (
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	nameBadRE = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)
)

// rateOf maps an envoyproxy/ratelimit unit and count to a weir rate, or
// explains why it cannot.
func rateOf(unit string, n int64) (string, error) {
	if n < 1 {
		return "", fmt.Errorf("requests_per_unit must be positive, got %d", n)
	}
	switch strings.ToLower(unit) {
	case "second":
		return strconv.FormatInt(n, 10) + "/s", nil
	case "minute":
		return strconv.FormatInt(n, 10) + "/m", nil
	case "hour":
		return strconv.FormatInt(n, 10) + "/h", nil
	case "day":
		return strconv.FormatInt(n, 10) + "/d", nil
	case "week":
		if n%7 != 0 {
			return "", errUnmappable{fmt.Sprintf("%d per week is not a whole number per day, and weir rates are per second, minute, hour or day", n)}
		}
		return strconv.FormatInt(n/7, 10) + "/d", nil
	case "month", "year":
		return "", errUnmappable{"calendar units (month, year) have no fixed length; weir rates are per second, minute, hour or day"}
	case "":
		return "", errors.New("rate_limit has no unit")
	}
	return "", fmt.Errorf("unknown unit %q", unit)
}

// errUnmappable is well-formed input weir cannot express.
type errUnmappable struct{ msg string }

func (e errUnmappable) Error() string { return e.msg }

// add converts the node at keys/vals with d's rate_limit. Malformed input
// is an error; what weir cannot express is noted and skipped.
func (c *converter) add(where, domain string, keys, vals []string, d *descriptor) error {
	rl := d.RateLimit
	l := &limit{domain: domain, match: keys, values: map[string]string{}, shadow: d.ShadowMode, unlimited: rl.Unlimited, where: where, origin: strings.SplitN(where, ": ", 2)[1]}
	for i, k := range keys {
		if vals[i] != "" {
			l.values[k] = vals[i]
		} else if l.group == "" {
			l.group = k
		}
	}
	if rl.Unlimited {
		if rl.Unit != "" || rl.RequestsPerUnit != 0 {
			c.note(Ignored, where, "unit and requests_per_unit are ignored on an unlimited rate_limit")
		}
		if d.ShadowMode {
			c.note(Ignored, where, "shadow_mode on an unlimited rate_limit has no effect")
			l.shadow = false
		}
	} else {
		rate, err := rateOf(rl.Unit, rl.RequestsPerUnit)
		var um errUnmappable
		switch {
		case errors.As(err, &um):
			c.note(Unmapped, where, "%s; this limit is left out", um.msg)
			return nil
		case err != nil:
			return err
		case rl.RequestsPerUnit > maxRequests && strings.EqualFold(rl.Unit, "second"):
			c.note(Unmapped, where, "%d per second is faster than weir's 1000000/s; this limit is left out", rl.RequestsPerUnit)
			return nil
		}
		l.rate, l.burst = rate, rl.RequestsPerUnit
		if strings.EqualFold(rl.Unit, "week") {
			c.note(Changed, where, "%d per week is written as %s with burst %d, the same rate", rl.RequestsPerUnit, rate, rl.RequestsPerUnit)
		}
	}
	l.name = c.uniqueName(domain, rl.Name, keys, vals)
	if rl.Name != "" {
		if c.envoyNames[domain] == nil {
			c.envoyNames[domain] = map[string]string{}
		}
		c.envoyNames[domain][rl.Name] = l.name
	}
	for _, r := range rl.Replaces {
		l.replaces = append(l.replaces, r.Name)
	}
	c.limits = append(c.limits, l)
	return nil
}

// uniqueName is the rate_limit's own name when it is a valid weir name not
// yet used, else one made from the domain and the path.
func (c *converter) uniqueName(domain, own string, keys, vals []string) string {
	base := own
	if !nameRE.MatchString(base) || c.names[base] {
		parts := []string{domain}
		for i, k := range keys {
			parts = append(parts, k)
			if vals[i] != "" {
				parts = append(parts, vals[i])
			}
		}
		base = nameBadRE.ReplaceAllString(strings.Join(parts, "."), "_")
	}
	base = strings.Trim(base[:min(len(base), 56)], ".")
	name := base
	for i := 2; c.names[name] || name == ""; i++ {
		name = fmt.Sprintf("%s.%d", base, i)
	}
	c.names[name] = true
	return name
}

// resolveReplaces turns replaces' rate_limit names into weir names,
// noting those that name no imported limit of the domain.
func (c *converter) resolveReplaces() {
	for _, l := range c.limits {
		var out []string
		for _, r := range l.replaces {
			if w, ok := c.envoyNames[l.domain][r]; ok {
				out = append(out, w)
			} else {
				c.note(Unmapped, l.where, "replaces %q: no imported limit of domain %q has that name; the replacement is dropped", r, l.domain)
			}
		}
		l.replaces = out
	}
}

// sortedValues lists l.values' keys in match order.
func (l *limit) sortedValues() []string {
	return slices.DeleteFunc(slices.Clone(l.match), func(k string) bool {
		_, ok := l.values[k]
		return !ok
	})
}

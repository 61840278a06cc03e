// Package envoyimport converts envoyproxy/ratelimit configuration files
// into a weir policy whose limits answer Envoy's rate limit service calls
// for the same domains and descriptors (see package envoyrls).
//
// Each node of a file's descriptor tree that has a rate_limit becomes one
// limit with the file's domain; match lists the keys from the root to the
// node, values the keys the tree pins to a value, and group the first key
// that is not pinned (so that, say, every remote address gets its own
// owner node rather than all sharing the pinned key's). shadow_mode becomes
// shadow, rate_limit.unlimited becomes unlimited and replaces keeps its
// names.
//
// envoyproxy/ratelimit counts in fixed windows; weir decides with GCRA. An
// imported limit keeps the rate (requests_per_unit per unit) and gets a
// burst of requests_per_unit, so a client at rest can still send the whole
// window's quota at once, but it can no longer send twice that across a
// window boundary, and spent quota returns continuously rather than all at
// the next window.
//
// What cannot be mapped is left out and reported, with the reason: values
// with a trailing wildcard, calendar units (month, year) and weeks whose
// count is not a multiple of 7, and keys repeated along one path. Settings
// that have no weir equivalent but do not change decisions (detailed_metric,
// value_to_metric) are reported as ignored.
//
// Usage:
//
//	res, err := envoyimport.Convert([]envoyimport.File{{Name: "config.yaml", Data: data}})
//	os.Stdout.Write(res.Policy)
//	for _, n := range res.Notes { fmt.Fprintln(os.Stderr, n) }
package envoyimport

// Package rlqstest helps test RLQS servers and what sits behind them.
//
//   - [Filter] decides requests as Envoy's rate_limit_quota filter does:
//     first request of a bucket decided by no_assignment_behavior and
//     reported at once, periodic reports of every bucket, token buckets
//     that start full and fill continuously, a re-sent identical bucket
//     kept, TTLs in whole seconds, expired_assignment_behavior, abandon.
//     It is pure: times are passed in.
//   - [Client] runs a Filter over a real gRPC stream, reporting every
//     reporting interval, for process tests and chaos.
//   - [Owner] is an in-process owner (a real lease.Grantor over a real
//     memstore) that answers lease refreshes with an injected clock.
//
// Usage:
//
//	f := rlqstest.NewFilter(rlqstest.FilterConfig{Domain: "edge", ReportingInterval: time.Second})
//	ok, first := f.Request(map[string]string{"tenant": "acme"}, now) // send first if non-nil
//	f.Apply(resp, now)
package rlqstest

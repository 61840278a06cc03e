// Package rlqs serves Envoy's Rate Limit Quota Service,
// envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas,
// so that Envoys decide requests locally from token buckets that weir
// assigns exactly: each stream is a lease holder (package lease) at its
// keys' owners, and an Envoy's token bucket never lets through more than
// the units leased to its stream.
//
// # Mapping
//
// The stream's first report names the domain; every later one must name
// the same. A bucket id is a map of strings, so order does not matter:
// each limit of the domain whose match lists exactly the id's keys offers
// its order, and the entries are resolved in it as an RLS descriptor is
// (policy.ResolveEnvoy). One limit reached: it governs the bucket.
// None (or an unknown domain, an unlimited or a shadow limit): ALLOW_ALL
// for Config.AllowTTL, re-resolved before it expires. Several: ambiguous,
// and like a limit that cannot be leased (no lease terms, strict, or a
// lease ttl under Config.MinLeaseTTL) it gets no assignment, so Envoy
// applies its no_assignment_behavior; both are counted in
// weir_rlqs_buckets{kind}, and the node logs a warning naming the limit
// once per limit.
//
// Concurrency limits (kind: concurrency) are not evaluated: Envoy cannot
// release a permit, and a token bucket cannot hold one. A bucket whose
// entries reach a concurrency limit is resolved as if that limit did not
// exist (ALLOW_ALL when nothing else governs it), and no permit is taken.
//
// # Assignments
//
// A governed bucket's units come from two lease holders per stream
// (stream name + "/a" and "/b"): the lease backing the token bucket in
// force stays open while the next is asked for. A lease of n units sent
// at s with ttl L backs a token bucket of max_tokens M, tokens_per_fill r
// every 1s, and a TTL of A whole seconds (Envoy reads the seconds only),
// with A + Delivery <= L − (time since s) and M + r·(A + Delivery) <= n.
// Envoy's bucket holds at most M and fills r a second, so an Envoy
// honouring it admits at most M + r·(t − a) between the assignment's
// arrival a and any t until it expires, and never more than n. A
// renewal re-sends the same bucket when the new lease carries it: Envoy
// then keeps its bucket's level (never above M) and restarts the TTL,
// and the new lease covers M again plus the fill until its own end. The
// older lease is settled once the renewal surely arrived (its send plus
// Delivery), returning all but M + r·(that moment − its own send). An
// exhausted limit gets DENY_ALL for the owner's retry-after in whole
// seconds; a bucket idle for Config.IdleAfter is abandoned and its leases
// settled. A stream that ends strands what it holds until the leases
// expire, since the Envoy keeps its assignments until their TTLs run out.
// docs/envoy.md ("RLS or RLQS") has the argument and its terms.
//
// Usage:
//
//	srv, err := rlqs.New(cfg, leases, limiter, logger, reg)
//	rlqs.Register(grpcServer, srv)
//
// The caller's duties: give a Leases that routes each item to its key's
// owner and answers Busy for what it could not get (cmd/node/rlqs.go),
// and a unique Config.NodeName; the server names every stream's holders
// with it and a random incarnation.
package rlqs

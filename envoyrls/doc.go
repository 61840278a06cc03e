// Package envoyrls serves Envoy's rate limit service API,
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, from weir's
// limiter, so that Envoy (alone or inside Istio, Contour, Emissary or Gloo)
// can use weir with its stock `ratelimit` HTTP filter.
//
// # Mapping
//
// A request names a domain and carries descriptors, each an ordered list of
// key/value entries. Limits answer a domain when the policy gives them
// `domain:`; their `match` lists the entry keys in order and `values` pins
// some keys to one value, as `value:` does in an envoyproxy/ratelimit
// configuration:
//
//	limits:
//	  - name: per-ip
//	    domain: edge
//	    match: [remote_address]
//	    rate: 10/s
//	    burst: 10
//	  - name: trusted-ip
//	    domain: edge
//	    match: [remote_address]
//	    values: {remote_address: 10.0.0.1}
//	    unlimited: true
//
// Each descriptor finds at most one limit with policy.ResolveEnvoy, which
// walks the domain's descriptor tree as envoyproxy/ratelimit does, and is
// decided on its own (descriptors of one request may belong to different
// groups, hence owners): a descriptor's quota is spent even when another
// descriptor of the request is over its limit, as in Envoy. hits_addend is
// the cost, 0 meaning 1; a descriptor's own hits_addend overrides the
// request's. `replaces` switches off the replaced limit when both apply to
// one request.
//
// # Response
//
// overall_code is OVER_LIMIT when any descriptor is; each status carries
// current_limit (the limit's rate as requests_per_unit per unit, with
// unit_multiplier when that is exact, else the closest figure per day),
// limit_remaining and duration_until_reset (until the limit is fully
// rested: GCRA refills continuously, there is no window). The exact quota
// is in response_headers_to_add: RateLimit-Policy and RateLimit
// (draft-ietf-httpapi-ratelimit-headers-11, written by httplimit), with
// Retry-After on denials. A descriptor decided by a failure policy adds
// Weir-Fallback with the mode. Shadow limits are decided but always OK.
//
// A domain no limit answers gets OK for every descriptor, as
// envoyproxy/ratelimit does, and is counted in
// weir_envoy_unknown_domain_requests_total. A descriptor no limit answers
// is OK without current_limit; an unlimited one has limit_remaining
// 4294967295.
//
// # Concurrency limits
//
// Limits of kind: concurrency are not evaluated here: Envoy's filter
// cannot release a permit, so every permit taken for it would hold its
// slot until its ttl. A descriptor whose limit is a concurrency limit is
// answered OK without current_limit, as a descriptor no limit answers,
// and takes no permit (nor does its replaces apply). hits_addend stays
// the up-front charge of rate limits; a gateway that learns a request's
// real cost settles it over weir's own API (/v1/settle with a reservation
// from /v1/decide).
//
// # Use
//
//	svc, err := envoyrls.New(lim, logger, reg) // lim is a *limiter.Limiter
//	rlsv3.RegisterRateLimitServiceServer(grpcServer, svc)
//
// The Service is safe for concurrent use and starts no goroutines.
package envoyrls

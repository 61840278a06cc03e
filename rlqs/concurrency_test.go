package rlqs

import "testing"

// TestResolve_concurrencyLimitNotEvaluated: a bucket whose entries reach
// only a concurrency limit is governed by nothing (ALLOW_ALL, no permit),
// and a rate limit's bucket beside it still resolves.
func TestResolve_concurrencyLimitNotEvaluated(t *testing.T) {
	p := mustPolicy(t, `limits:
  - {name: exports, domain: edge, match: [job], rate: 2/m, burst: 2}
  - {name: tenant, domain: edge, match: [tenant], rate: 200/s, burst: 3000, lease: {max: 3000, ttl: 3s}}
`)
	if r := resolve(p, "edge", map[string]string{"job": "x"}, 0); r.kind != kindUnservable || r.label != "exports" {
		t.Fatalf("before it is a concurrency limit: %+v, want unservable exports", r)
	}
	p.Limit("exports").Def().Concurrency = true // until policy has kind: concurrency
	if r := resolve(p, "edge", map[string]string{"job": "x"}, 0); r.kind != kindAllow || r.label != "" {
		t.Errorf("concurrency bucket: %+v, want allowed, governed by nothing", r)
	}
	if r := resolve(p, "edge", map[string]string{"tenant": "acme"}, 0); r.kind != kindLeased || r.label != "tenant" {
		t.Errorf("rate bucket: %+v, want leased by tenant", r)
	}
}

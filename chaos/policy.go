package chaos

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/chaos/history"
	"github.com/weirhq/weir/chaos/workload"
	"github.com/weirhq/weir/policy"
	"go.yaml.in/yaml/v3"
)

// DefaultPolicy is the policy the chaos nodes enforce unless
// Options.Policy says otherwise. Its numbers are
// chosen so the checker can tell the outcomes apart: the hot tenants are
// offered far more than their rate, and a tenant's burst takes 15 s to
// refill, longer than the cluster takes to notice a dead owner (about 5 s),
// so an owner that restarted a key from a full burst would show.
const DefaultPolicy = `version: chaos.1
unknown_descriptors: reject
tenant_descriptor: tenant
defaults:
  consistency: fast
limits:
  # Fast, local fallback: the composite of tenant and user.
  - name: tenant
    match: [tenant]
    rate: 2/s
    burst: 30
    on_failure: local
    fallback_rate: 1/s
    fallback_burst: 2
  - name: user
    match: [tenant, user]
    group: tenant
    rate: 10/s
    burst: 10
    on_failure: local
    fallback_rate: 1/s
    fallback_burst: 2
  # Strict, fail closed: a login limit decided in Redis.
  - name: login
    match: [login]
    rate: 2/s
    burst: 20
    consistency: strict
    on_failure: closed
  # Fast, fail open.
  - name: api
    match: [api]
    rate: 5/s
    burst: 10
    on_failure: open
  # Fast, the default failure policy (no on_failure): a local fallback to
  # the limit's share per member. Its keys are the hot tenants' names used
  # as groups, so the victim's owner owns one.
  - name: quota
    match: [quota]
    rate: 5/s
    burst: 10
  # Fast, leasable (issue 13), the default failure policy: owners lease
  # batches of its keys' units to the other nodes, which decide from them
  # without a hop. Its burst (20) is at least 4 units per node for up to
  # five nodes, so it is leased in every scenario. Its keys are in the
  # groups of the first two hot tenants, so the victim's owner owns one.
  - name: lease
    match: [lease]
    rate: 10/s
    burst: 20
    lease: {max: 5, ttl: 250ms}
`

// DefaultClasses is the workload's request mix (unless Options.Classes
// says otherwise): shares of the offered rate, DefaultRate calls a second
// by default.
func DefaultClasses() []workload.Class {
	return []workload.Class{
		// Three hot tenants at ~50/s each against 2/s, users spread.
		{Name: "hot", Weight: 150, Keys: 3, Cost: 1, Limits: []string{"tenant", "user"},
			Descriptors: map[string]string{"tenant": "hot-{k}", "user": "u{r}"}, Spread: 20},
		// Cold tenants: thousands of keys, each rarely used.
		{Name: "cold", Weight: 80, Keys: 5000, Cost: 1, Limits: []string{"tenant", "user"},
			Descriptors: map[string]string{"tenant": "cold-{k}", "user": "u"}},
		// Two login accounts at 12/s against 2/s, cost 1.
		{Name: "login", Weight: 24, Keys: 2, Cost: 1, Limits: []string{"login"},
			Descriptors: map[string]string{"login": "acct-{k}"}},
		// Two API keys at 20/s against 5/s, cost 2.
		{Name: "api", Weight: 40, Keys: 2, Cost: 2, Limits: []string{"api"},
			Descriptors: map[string]string{"api": "key-{k}"}},
		// Two quota keys at 15/s against 5/s, in the groups of the first
		// two hot tenants.
		{Name: "quota", Weight: 30, Keys: 2, Cost: 1, Limits: []string{"quota"},
			Descriptors: map[string]string{"quota": "hot-{k}"}},
		// Two leasable keys at ~20/s against 10/s, sent to every node, in
		// the groups of the first two hot tenants. A request matches no
		// other limit, so a non-owner may decide it from its leases.
		{Name: "lease", Weight: 40, Keys: 2, Cost: 1, Limits: []string{"lease"},
			Descriptors: map[string]string{"lease": "hot-{k}"}},
	}
}

// DefaultRate is the workload's offered rate in calls a second. It was 300
// for the weights of 324 before the leasable class; 340 for 364 keeps every
// older class's rate within 1% of what it was.
const DefaultRate = 340

// DefaultVictimGroup is the group whose owner a targeted nemesis picks:
// the first hot tenant's.
const DefaultVictimGroup = "hot-0"

// limitSpecs describes the policy's limits for the history header, and
// checks that every class's limits are in it: a class naming a limit the
// policy lacks would make every bound unknowable.
//
// A limit whose policy writes no on_failure (neither the limit nor its
// defaults) is judged by the documented default (docs/operations.md,
// "Fallback allowance"): a local fallback to the limit's share per member.
// That holds whatever the binary under test does, so a node that still
// fails open by default fails the check.
func limitSpecs(policyYAML []byte, classes []workload.Class) ([]history.LimitSpec, error) {
	p, err := policy.Parse("chaos policy", policyYAML)
	if err != nil {
		return nil, err
	}
	written, err := writtenFailureModes(policyYAML)
	if err != nil {
		return nil, err
	}
	var out []history.LimitSpec
	for _, l := range p.Limits {
		if l.Shadow {
			continue // decided but never enforced: nothing to bound
		}
		spec := history.LimitSpec{
			Name:             l.Name,
			Interval:         time.Duration(l.Params.Interval),
			Burst:            l.Params.Burst,
			Consistency:      string(l.Consistency),
			OnFailure:        string(l.OnFailure),
			FallbackInterval: time.Duration(l.Fallback.Interval),
			FallbackBurst:    l.Fallback.Burst,
			RatePer:          l.Rate.Per,
		}
		if l.Lease != nil {
			spec.LeaseMax, spec.LeaseTTL = l.Lease.Max, l.Lease.TTL
		}
		if l.Kind == policy.KindConcurrency {
			// Interval and Burst carry the permit bound (Params), so
			// the header reads as any limit's; the checker judges the
			// permits instead of windows.
			spec.MaxInFlight, spec.PermitTTL = l.MaxInFlight, l.TTL
			out = append(out, spec)
			continue
		}
		switch {
		case !written(l.Name):
			spec.OnFailure, spec.Default, spec.FallbackShare = string(policy.FailLocal), true, true
			spec.FallbackInterval, spec.FallbackBurst = 0, 0
		case l.OnFailure == policy.FailLocal && l.Fallback.Interval == 0:
			// local without a fallback rate of its own: the share too.
			spec.FallbackShare = true
		}
		out = append(out, spec)
	}
	for _, c := range classes {
		for _, name := range c.Limits {
			if l := p.Limit(name); l == nil || l.Shadow {
				return nil, fmt.Errorf("chaos: workload class %q expects limit %q, which the policy does not enforce", c.Name, name)
			}
		}
	}
	return out, nil
}

// writtenFailureModes reads which limits get their on_failure from the
// policy text (their own, or the defaults'), rather than from weir's
// default.
func writtenFailureModes(policyYAML []byte) (func(limit string) bool, error) {
	var f struct {
		Defaults struct {
			OnFailure string `yaml:"on_failure"`
		} `yaml:"defaults"`
		Limits []struct {
			Name      string `yaml:"name"`
			OnFailure string `yaml:"on_failure"`
		} `yaml:"limits"`
	}
	if err := yaml.Unmarshal(policyYAML, &f); err != nil {
		return nil, fmt.Errorf("chaos policy: %w", err)
	}
	own := map[string]bool{}
	for _, l := range f.Limits {
		own[l.Name] = l.OnFailure != ""
	}
	return func(limit string) bool { return f.Defaults.OnFailure != "" || own[limit] }, nil
}

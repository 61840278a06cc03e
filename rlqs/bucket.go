package rlqs

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/policy"
)

// Input bounds of a bucket id, those of an RLS descriptor (envoyrls;
// limiter.MaxDescriptors and MaxDescriptorBytes).
const (
	MaxBucketEntries = 32  // entries in one bucket id
	MaxBytes         = 256 // the domain, an entry's key or value
	// MaxCount bounds num_requests_allowed and num_requests_denied of one
	// usage.
	MaxCount = 1 << 40
)

// kind says how a bucket is served.
type kind uint8

const (
	// kindLeased: a leasable limit; token buckets backed by leases.
	kindLeased kind = iota
	// kindAllow: no limit governs the bucket (unknown domain, no match, an
	// unlimited or shadow limit): blanket ALLOW_ALL.
	kindAllow
	// kindUnservable: a limit governs it that cannot be leased (no lease
	// terms, strict, or a lease ttl under Config.MinLeaseTTL): no
	// assignment, Envoy applies its no_assignment_behavior.
	kindUnservable
	// kindAmbiguous: the entries, in different orders, reach different
	// limits: no assignment, as for kindUnservable.
	kindAmbiguous
)

var kindNames = [...]string{"leased", "allow", "unservable", "ambiguous"}

func (k kind) String() string { return kindNames[k] }

// bucketKey is a bucket id's canonical form: its entries sorted by key,
// so that two maps with the same entries are one bucket.
func bucketKey(id *rlqsv3.BucketId) string {
	m := id.GetBucket()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%d:%s=%d:%s;", len(k), k, len(m[k]), m[k])
	}
	return b.String()
}

// checkBucketID refuses a bucket id that cannot name a bucket.
func checkBucketID(id *rlqsv3.BucketId) error {
	m := id.GetBucket()
	switch {
	case len(m) == 0:
		return errors.New("bucket_id has no entries")
	case len(m) > MaxBucketEntries:
		return fmt.Errorf("bucket_id has %d entries, the most is %d", len(m), MaxBucketEntries)
	}
	for k, v := range m {
		if k == "" || len(k) > MaxBytes || len(v) > MaxBytes || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("bucket_id entry %.32q: key must be 1 to %d bytes and value at most %d, UTF-8", k, MaxBytes, MaxBytes)
		}
	}
	return nil
}

// resolution is what a bucket maps to under one policy.
type resolution struct {
	kind  kind
	label string        // the limit's name; "" when none governs
	ref   lease.Request // the lease request template when kindLeased
}

// resolve maps a bucket id of domain to its limit. A bucket id is a map,
// so it has no order; an RLS descriptor is ordered. Each domain limit
// whose match lists exactly the id's keys offers its order; the entries
// are walked in each such order as an RLS descriptor would be
// (policy.ResolveEnvoy). One limit reached: that limit governs. None: no
// limit governs (as an unmatched RLS descriptor is OK). Several different
// ones: ambiguous. A concurrency limit reached counts as none.
func resolve(p *policy.Policy, domain string, id map[string]string, minTTL int64) resolution {
	if !p.HasDomain(domain) {
		return resolution{kind: kindAllow}
	}
	var found []policy.Match
	tried := map[string]bool{}
	for _, l := range p.Limits {
		if l.Envoy.Domain != domain || len(l.Match) != len(id) || !hasKeys(id, l.Match) {
			continue
		}
		order := strings.Join(l.Match, "\x00")
		if tried[order] {
			continue
		}
		tried[order] = true
		entries := make([]policy.EnvoyEntry, len(l.Match))
		for i, k := range l.Match {
			entries[i] = policy.EnvoyEntry{Key: k, Value: id[k]}
		}
		m, ok := p.ResolveEnvoy(domain, entries)
		if ok && m.Limit.Def().Concurrency {
			continue // not evaluated: Envoy cannot release a permit (package doc)
		}
		if ok && !slices.ContainsFunc(found, func(f policy.Match) bool { return f.Limit == m.Limit }) {
			found = append(found, m)
		}
	}
	switch {
	case len(found) == 0:
		return resolution{kind: kindAllow}
	case len(found) > 1:
		return resolution{kind: kindAmbiguous, label: found[0].Limit.Name}
	}
	return governed(found[0], minTTL)
}

func hasKeys(id map[string]string, keys []string) bool {
	for _, k := range keys {
		if _, ok := id[k]; !ok {
			return false
		}
	}
	return true
}

// governed is the resolution of a bucket that limit m governs.
func governed(m policy.Match, minTTL int64) resolution {
	l := m.Limit
	switch {
	case l.Envoy.Unlimited || m.Shadow:
		return resolution{kind: kindAllow, label: l.Name}
	case l.Lease == nil || l.Consistency != policy.ConsistencyFast || l.Lease.TTL.Nanoseconds() < minTTL:
		return resolution{kind: kindUnservable, label: l.Name}
	}
	return resolution{kind: kindLeased, label: l.Name, ref: lease.Request{
		Group: m.GroupValue, Key: m.Key, Limit: m.Params, Terms: *l.Lease, Label: l.Name,
	}}
}

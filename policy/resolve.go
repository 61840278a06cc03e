package policy

import (
	"fmt"

	"github.com/weirhq/weir/limitkey"
)

// Resolve appends to dst one Match per limit whose Match descriptors are all
// present in desc, in policy order, and returns the extended slice. A
// descriptor with an empty value counts as absent.
//
// The key of a match is limitkey.Key(group value, limit name, v1, v2...):
//
//	weir:{<group value>}:<limit name>:<v1>:<v2>...
//
// where v1, v2... are the values of the limit's Match descriptors in order
// (the group's value appears again among them). In the group value and in
// every v_i the bytes '%', '{', '}' and ':' are written as %25, %7B, %7D and
// %3A (package limitkey has the grammar and the escaping rule), so values
// can neither close the hash tag nor split fields. Keys that share a group
// value share a Redis Cluster hash slot. Limit names cannot contain those
// bytes.
//
// When the policy rejects unknown descriptors and desc has a name no limit
// uses, Resolve returns dst unchanged and an error wrapping
// ErrUnknownDescriptor that names the descriptor (the smallest such name).
//
// Resolve allocates only the key strings and, if needed, a larger dst.
func (p *Policy) Resolve(desc map[string]string, dst []Match) ([]Match, error) {
	// vals holds the request's value of every known descriptor, by position
	// in p.names. Policies rarely use more than a handful of names, so the
	// array keeps this off the heap.
	var buf [32]string
	vals := buf[:]
	if len(p.names) > len(buf) {
		vals = make([]string, len(p.names))
	}
	unknown, found := "", false
	for name, v := range desc {
		i, ok := p.index[name]
		if !ok {
			if p.UnknownDescriptors != UnknownIgnore && (!found || name < unknown) {
				unknown, found = name, true
			}
			continue
		}
		vals[i] = v
	}
	if found {
		return dst, fmt.Errorf("%w %q", ErrUnknownDescriptor, unknown)
	}
	prof := p.tenantProfile(vals)
	var kbuf [32]string // one limit's values, in its Match order
	for li, l := range p.Limits {
		if l.Envoy.Domain != "" {
			continue // answers Envoy RLS only, see ResolveEnvoy
		}
		values, ok := keyValues(l, vals, kbuf[:0])
		if !ok {
			continue
		}
		group := values[l.groupPos]
		e := prof[li]
		dst = append(dst, Match{
			Limit:      l,
			Key:        limitkey.Key(group, l.Name, values...),
			GroupValue: group,
			Params:     e.params,
			Shadow:     e.shadow,
		})
	}
	return dst, nil
}

// tenantProfile picks the numbers for the request's tenant.
func (p *Policy) tenantProfile(vals []string) profile {
	// Validation guarantees tenantIdx >= 0 whenever there are tenants.
	if len(p.tenants) == 0 || p.tenantIdx < 0 {
		return p.base
	}
	if tenant := vals[p.tenantIdx]; tenant != "" {
		if prof, ok := p.tenants[tenant]; ok {
			return prof
		}
	}
	return p.base
}

// keyValues appends to dst the request's values of l's Match descriptors,
// in order, and returns false when one of them is absent.
func keyValues(l *Limit, vals, dst []string) ([]string, bool) {
	for _, di := range l.match {
		if vals[di] == "" {
			return nil, false
		}
		dst = append(dst, vals[di])
	}
	return dst, true
}

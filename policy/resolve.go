package policy

import (
	"fmt"
	"strings"
)

// KeyPrefix starts every key Resolve builds.
const KeyPrefix = "weir:"

// Resolve appends to dst one Match per limit whose Match descriptors are all
// present in desc, in policy order, and returns the extended slice. A
// descriptor with an empty value counts as absent.
//
// The key of a match is
//
//	weir:{<group value>}:<limit name>:<v1>:<v2>...
//
// where v1, v2... are the values of the limit's Match descriptors in order
// (the group's value appears again among them). In the group value and in
// every v_i the bytes '%', '{', '}' and ':' are written as %25, %7B, %7D and
// %3A, so values can neither close the hash tag nor split fields. Keys that
// share a group value share a Redis Cluster hash slot. Limit names cannot
// contain those bytes.
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
	for li, l := range p.Limits {
		if l.Envoy.Domain != "" {
			continue // answers Envoy RLS only, see ResolveEnvoy
		}
		size, ok := keySize(l, vals)
		if !ok {
			continue
		}
		group := vals[l.match[l.groupPos]]
		e := prof[li]
		dst = append(dst, Match{
			Limit:      l,
			Key:        buildKey(l, vals, group, size),
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

// keySize returns the length of l's key for vals, and false when one of l's
// descriptors is absent.
func keySize(l *Limit, vals []string) (int, bool) {
	// "weir:{" + group + "}:" + name + (":" + v)*
	n := len(KeyPrefix) + 3 + len(l.Name)
	for _, di := range l.match {
		v := vals[di]
		if v == "" {
			return 0, false
		}
		n += 1 + escapedLen(v)
	}
	return n + escapedLen(vals[l.match[l.groupPos]]), true
}

func buildKey(l *Limit, vals []string, group string, size int) string {
	var b strings.Builder
	b.Grow(size)
	b.WriteString(KeyPrefix)
	b.WriteByte('{')
	writeEscaped(&b, group)
	b.WriteString("}:")
	b.WriteString(l.Name)
	for _, di := range l.match {
		b.WriteByte(':')
		writeEscaped(&b, vals[di])
	}
	return b.String()
}

func needsEscape(c byte) bool { return c == '%' || c == '{' || c == '}' || c == ':' }

func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n += 2
		}
	}
	return n
}

func writeEscaped(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !needsEscape(c) {
			continue
		}
		b.WriteString(s[start:i])
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xF])
		start = i + 1
	}
	b.WriteString(s[start:])
}

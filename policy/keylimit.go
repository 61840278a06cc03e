package policy

import "strings"

// LimitOfKey returns the limit of this policy that built key (see Resolve
// for the key's shape), or nil when no limit of this policy builds it.
// Safe for concurrent use; it does not allocate.
func (p *Policy) LimitOfKey(key string) *Limit {
	l, _, ok := p.limitOfKey(key)
	if !ok {
		return nil
	}
	return l
}

// GroupOfKey returns the group value a key built by Resolve carries in its
// hash tag, unescaped: the value that routes the key's decisions to an
// owner (Match.GroupValue). ok is false when key has no weir hash tag.
func GroupOfKey(key string) (group string, ok bool) {
	rest, ok := strings.CutPrefix(key, KeyPrefix+"{")
	if !ok {
		return "", false
	}
	tag, _, ok := strings.Cut(rest, "}:")
	if !ok {
		return "", false
	}
	return unescape(tag), true
}

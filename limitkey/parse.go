package limitkey

import "strings"

// Parts are the fields of a key, as the key holds them (still escaped).
type Parts struct {
	// Tag is the group, escaped: the key's hash tag.
	Tag string
	// Name is the limit name.
	Name string
	// Values are the value fields joined by ':' (escaped values hold no
	// ':'); see NumValues and Value.
	Values string
}

// Split cuts key into its fields without allocating. ok is false unless key
// has the grammar's shape: the prefix, a non-empty group tag that is the
// escape of some value (so GroupTag(Group(key)) == HashTag(key)), a
// non-empty name and at least one value field. Values are not checked:
// they are cut at ':' and returned as the key holds them.
func Split(key string) (p Parts, ok bool) {
	rest, ok := strings.CutPrefix(key, Prefix+"{")
	if !ok {
		return Parts{}, false
	}
	end := strings.IndexByte(rest, '}')
	if end <= 0 || !canonical(rest[:end]) {
		return Parts{}, false
	}
	p.Tag, rest = rest[:end], rest[end+1:]
	if rest, ok = strings.CutPrefix(rest, ":"); !ok {
		return Parts{}, false
	}
	p.Name, p.Values, ok = strings.Cut(rest, ":")
	if !ok || p.Name == "" {
		return Parts{}, false
	}
	return p, true
}

// NumValues returns the number of value fields.
func (p Parts) NumValues() int { return strings.Count(p.Values, ":") + 1 }

// Value returns value field i (from 0), still escaped, or "" when the key
// has no field i. It does not allocate.
func (p Parts) Value(i int) string {
	rest := p.Values
	for ; i > 0; i-- {
		var ok bool
		if _, rest, ok = strings.Cut(rest, ":"); !ok {
			return ""
		}
	}
	v, _, _ := strings.Cut(rest, ":")
	return v
}

// LimitName returns the limit-name field of key, or false when key does not
// have the grammar's shape (see Split). It does not allocate.
func LimitName(key string) (string, bool) {
	p, ok := Split(key)
	return p.Name, ok
}

// Group returns the group value of key, unescaped: the value decisions
// route by (policy.Match.GroupValue), or false when key does not have the
// grammar's shape (see Split). It allocates only when the group holds an
// escape.
func Group(key string) (string, bool) {
	p, ok := Split(key)
	if !ok {
		return "", false
	}
	return Unescape(p.Tag), true
}

// HashTag returns the hash tag of key as Redis Cluster defines it: the
// text between the first '{' and the first '}' after it, when that text is
// not empty. It returns "" when key has no such tag, in which case Redis
// hashes the whole key. It applies to any string, not only weir's keys, and
// does not allocate.
func HashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return ""
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 { // no '}' at all, or "{}" which Redis ignores
		return ""
	}
	return key[open+1 : open+1+end]
}

package policy

// LimitOfKey returns the limit of this policy that built key (see Resolve
// for the key's shape; limitkey parses it), or nil when no limit of this
// policy builds it. Safe for concurrent use; it does not allocate.
func (p *Policy) LimitOfKey(key string) *Limit {
	l, _, ok := p.limitOfKey(key)
	if !ok {
		return nil
	}
	return l
}

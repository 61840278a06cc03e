package cluster

import "github.com/weirhq/weir/limiter"

var _ limiter.WaitHinter = (*Cluster)(nil)

// MayWait reports whether deciding key of group may wait on another
// process: the group belongs to another node (a forward), the limit is
// strict (Redis decides), or this owner must first load the key from Redis
// (it does not hold it, or a thaw is pending). The limiter decides such
// requests of a batch concurrently. Safe for concurrent use; no I/O.
func (c *Cluster) MayWait(group, key string, strict bool) bool {
	if c.owner(group) != c.cfg.LocalName {
		return true
	}
	if c.deps.Redis == nil {
		return false
	}
	if (strict && c.strict != nil) || c.thawPending() {
		return true
	}
	return !c.known(c.deps.Mem.Epoch(), group, key)
}

package cluster

// Sweep frees the rested keys of owner memory at now (on the TATs' time
// base) and returns how many it freed, remembering them so that their next
// decision needs no load from Redis while this node keeps owning them (see
// sweptSet). Call it periodically instead of the memory's own Sweep. Safe
// for concurrent use.
func (c *Cluster) Sweep(now int64) int {
	if c.swept == nil {
		return c.deps.Mem.Sweep(now)
	}
	epoch := c.deps.Mem.Epoch()
	return c.deps.Mem.SweepFunc(now, func(key string) { c.swept.add(epoch, key) })
}

// mustPersist reports whether a TAT of tat for a key of a limit with
// emission interval interval, admitted at now, must go to the write-behind.
// It need not while the key is at most PersistSlack units from rested:
// losing that TAT in a crash admits at most PersistSlack units more than
// the write-behind's own bound, because the TAT Redis holds is never later
// than the real one and the new owner resumes from the later of it and now.
func (c *Cluster) mustPersist(tat, now, interval int64) bool {
	return tat-now > c.cfg.PersistSlack*interval
}

// markHeld hands the write-behind the TAT of every held key for which lost
// is true, so that keys mustPersist let go unpersisted reach Redis before a
// hand-off drops them.
func (c *Cluster) markHeld(lost func(key string) bool) {
	if c.deps.WriteBehind == nil || c.cfg.PersistSlack == 0 {
		return
	}
	c.deps.Mem.Range(func(key string, tat int64) {
		if lost(key) {
			c.deps.WriteBehind.Mark(key, tat)
		}
	})
}

// known reports whether this owner can decide key of group at epoch without
// loading it: the memory holds it, or swept it as rested during epoch.
func (c *Cluster) known(epoch uint64, group, key string) bool {
	return c.deps.Mem.Has(group, key) || (c.swept != nil && c.swept.has(epoch, key))
}

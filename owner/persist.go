package owner

// Sweep frees the rested keys of owner memory at now (on the TATs' time
// base) and returns how many it freed, remembering them so that their next
// decision needs no load from Redis while this node keeps owning them (see
// sweptSet). Call it periodically instead of the memory's own Sweep. Safe
// for concurrent use.
func (o *Owner) Sweep(now int64) int {
	if o.swept == nil {
		return o.deps.Mem.Sweep(now)
	}
	epoch := o.deps.Mem.Epoch()
	return o.deps.Mem.SweepFunc(now, func(key string) { o.swept.add(epoch, key) })
}

// mustPersist reports whether a TAT of tat for a key of a limit with
// emission interval interval, admitted at now, must go to the write-behind.
// It need not while the key is at most PersistSlack units from rested:
// losing that TAT in a crash admits at most PersistSlack units more than
// the write-behind's own bound, because the TAT Redis holds is never later
// than the real one and the new owner resumes from the later of it and now.
func (o *Owner) mustPersist(tat, now, interval int64) bool {
	return tat-now > o.cfg.PersistSlack*interval
}

// markHeld hands the write-behind the TAT of every held key for which lost
// is true, so that keys mustPersist let go unpersisted reach Redis before a
// hand-off drops them.
func (o *Owner) markHeld(lost func(key string) bool) {
	if o.deps.WriteBehind == nil || o.cfg.PersistSlack == 0 {
		return
	}
	o.deps.Mem.Range(func(key string, tat int64) {
		if lost(key) {
			o.deps.WriteBehind.Mark(key, tat)
		}
	})
}

// known reports whether this owner can decide key of group at epoch without
// loading it: the memory holds it, or swept it as rested during epoch.
func (o *Owner) known(epoch uint64, group, key string) bool {
	return o.deps.Mem.Has(group, key) || (o.swept != nil && o.swept.has(epoch, key))
}

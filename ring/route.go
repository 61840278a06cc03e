package ring

// OwnerAt is Owner and Epoch read from one snapshot of the ring: the owner
// of group and the fingerprint of the assignment it was read from, so a
// route computed once per request names both consistently. ok is false
// when the ring is empty. Safe for concurrent use; it does not allocate
// with the default Hasher.
func (r *Ring) OwnerAt(group string) (owner string, epoch uint64, ok bool) {
	s := r.snap.Load()
	if len(s.owners) == 0 {
		return "", s.epoch, false
	}
	var h uint64
	if sh, ok := r.cfg.Hasher.(stringHasher); ok {
		h = sh.Sum64String(group)
	} else {
		h = r.cfg.Hasher.Sum64([]byte(group))
	}
	return s.owners[h%uint64(len(s.owners))], s.epoch, true
}

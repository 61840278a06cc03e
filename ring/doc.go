// Package ring maps a group to the name of the cluster member that owns it.
//
// Every rate-limit key belongs to a group (its hash tag, usually the tenant),
// and every group has exactly one owner node, which decides for it in
// memory. The ring is consistent hashing with bounded loads
// (github.com/buraksezer/consistent): groups hash into a fixed number of
// partitions, and partitions are assigned to members through virtual nodes
// so that no member owns more than Load times its fair share. When a member
// joins or leaves, mostly the partitions of that member move; the load bound
// may move a few more.
//
// The package knows nothing of networks or membership: it maps strings to
// strings, and imports nothing else of weir's.
//
// Usage:
//
//	r, err := ring.New(ring.DefaultConfig(), "node-a", "node-b", "node-c")
//	if err != nil {
//		return err
//	}
//	owner, ok := r.Owner("tenant-42") // ok is false only on an empty ring
//
//	// on every membership change:
//	if err := r.Set(names); err != nil {
//		log.Warn("ring not updated", "err", err)
//	}
//
// Caller's duties: every node must build its ring from the same Config and
// the same member names, or nodes disagree about owners (the order of names
// does not matter). Rebuild with Set whenever membership changes; Set is a
// no-op when the names are unchanged, and Version tells whether ownership may
// have moved. A Ring is safe for concurrent use; Owner never blocks.
package ring

package membership

import (
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
)

// Failed returns, sorted, the names of members that were declared dead —
// they stopped answering, as on the far side of a network split or after a
// crash — and have not come back, within the last FailedMemory. Members
// that left gracefully (Leave) are not among them. The cluster uses this to
// tell a split, after which state kept in memory may be stale, from a
// planned scale-down. The caller owns the slice.
func (m *Membership) Failed() []string {
	cutoff := time.Now().Add(-m.forget)
	m.mu.Lock()
	out := make([]string, 0, len(m.mu.failed))
	for name, at := range m.mu.failed {
		if at.Before(cutoff) {
			delete(m.mu.failed, name)
			continue
		}
		out = append(out, name)
	}
	m.mu.Unlock()
	slices.Sort(out)
	return out
}

// Joined reports whether this node has joined the cluster: a join of its
// seeds has succeeded, or it has no seeds (it starts a cluster, or is a
// cluster of one). Until then it sees only itself and owns every group.
func (m *Membership) Joined() bool {
	return len(m.seeds) == 0 || m.joined.Load()
}

// noteFailureLocked records n as failed when it disappeared without having
// announced that it was leaving, and forgets it when it is alive again or
// left on purpose. memberlist's event does not say which happened (the
// node's State field is not filled in for events), so a leaving node
// gossips Leaving in its metadata first; see announceLeaving.
func (m *Membership) noteFailureLocked(n *memberlist.Node, alive bool) {
	if !alive && !decodeMeta(n.Meta).Leaving {
		m.mu.failed[n.Name] = time.Now()
		return
	}
	delete(m.mu.failed, n.Name)
}

// announceLeaving gossips this node's metadata with Leaving set, waiting up
// to timeout for the broadcast. A failure is logged: the leave still
// happens, and peers that missed it count this node as failed.
func (m *Membership) announceLeaving(timeout time.Duration) {
	leaving := m.meta
	leaving.Leaving = true
	b := leaving.encode()
	m.delegate.meta.Store(&b)
	if err := m.list.UpdateNode(timeout); err != nil {
		m.logger.Warn("could not announce leaving; peers may count this node as failed", "err", err)
	}
}

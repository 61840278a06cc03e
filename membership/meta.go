package membership

import (
	"encoding/json"
	"sync/atomic"
)

// meta is what a node gossips about itself besides its name and address.
// JSON with short keys keeps it far under memberlist.MetaMaxSize, and lets
// later versions add fields that older ones ignore.
type meta struct {
	GRPCAddr string `json:"g,omitempty"`
	PeerAddr string `json:"p,omitempty"`
	Region   string `json:"r,omitempty"`
	// Leaving is gossiped just before a graceful Leave, so that peers can
	// tell the leave from a failure: memberlist reports both the same way.
	Leaving bool `json:"l,omitempty"`
}

func (m meta) encode() []byte {
	b, _ := json.Marshal(m) // cannot fail for strings and bools
	return b
}

// decodeMeta never fails: a node whose metadata cannot be read is still a
// member, just one without addresses or region.
func decodeMeta(b []byte) meta {
	var m meta
	if len(b) > 0 {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

// delegate hands memberlist this node's metadata, which changes once: when
// the node is about to leave. weir gossips nothing else, so the remaining
// Delegate methods do nothing. Safe for concurrent use.
type delegate struct {
	meta atomic.Pointer[[]byte]
}

func newDelegate(meta []byte) *delegate {
	d := &delegate{}
	d.meta.Store(&meta)
	return d
}

func (d *delegate) NodeMeta(limit int) []byte {
	meta := *d.meta.Load()
	if len(meta) > limit { // Validate prevents this; never send a truncated meta
		return nil
	}
	return meta
}

func (*delegate) NotifyMsg([]byte)                           {}
func (*delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (*delegate) LocalState(join bool) []byte                { return nil }
func (*delegate) MergeRemoteState(buf []byte, join bool)     {}

package membership

import "encoding/json"

// meta is what a node gossips about itself besides its name and address.
// JSON with short keys keeps it far under memberlist.MetaMaxSize, and lets
// later versions add fields that older ones ignore.
type meta struct {
	GRPCAddr string `json:"g,omitempty"`
	PeerAddr string `json:"p,omitempty"`
	Region   string `json:"r,omitempty"`
}

func (m meta) encode() []byte {
	b, _ := json.Marshal(m) // cannot fail for strings
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

// delegate hands memberlist this node's metadata. weir gossips nothing
// else, so the remaining Delegate methods do nothing.
type delegate struct {
	meta []byte
}

func (d delegate) NodeMeta(limit int) []byte {
	if len(d.meta) > limit { // Validate prevents this; never send a truncated meta
		return nil
	}
	return d.meta
}

func (delegate) NotifyMsg([]byte)                           {}
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (delegate) LocalState(join bool) []byte                { return nil }
func (delegate) MergeRemoteState(buf []byte, join bool)     {}

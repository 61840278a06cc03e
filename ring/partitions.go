package ring

import (
	"encoding/binary"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Partitions is one immutable assignment, as a client outside the cluster
// needs it to find a group's owner without asking: Owner(group) is
// Members[Owners[Hash(group) % len(Owners)]].
type Partitions struct {
	// Members are the member names, sorted.
	Members []string
	// Owners[p] is the index in Members of partition p's owner; empty when
	// the ring is empty.
	Owners []uint32
	// Epoch fingerprints Members and Owners: rings that place every group
	// alike have the same Epoch, whatever their Version. Never zero.
	Epoch uint64
}

// Partitions returns the current assignment and true when the ring hashes
// groups with the default xxhash64, the only hash an outside client can be
// told to reproduce; with another Hasher it returns false. The caller owns
// the slices. Safe for concurrent use.
func (r *Ring) Partitions() (Partitions, bool) {
	if _, ok := r.cfg.Hasher.(xxHasher); !ok {
		return Partitions{}, false
	}
	s := r.snap.Load()
	p := Partitions{Members: slices.Clone(s.members), Epoch: s.epoch}
	if len(s.owners) == 0 {
		return p, true
	}
	index := make(map[string]uint32, len(s.members))
	for i, m := range s.members {
		index[m] = uint32(i)
	}
	p.Owners = make([]uint32, len(s.owners))
	for i, o := range s.owners {
		p.Owners[i] = index[o]
	}
	return p, true
}

// Epoch returns the fingerprint of the current assignment (see
// Partitions.Epoch) without copying it. Safe for concurrent use; it does not
// allocate.
func (r *Ring) Epoch() uint64 { return r.snap.Load().epoch }

// fingerprint hashes the member names (each with its length, so that no two
// lists collide by concatenation) and the owner of every partition.
func fingerprint(members, owners []string) uint64 {
	d := xxhash.New()
	var n [8]byte
	write := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		_, _ = d.Write(n[:])
		_, _ = d.WriteString(s)
	}
	for _, m := range members {
		write(m)
	}
	binary.LittleEndian.PutUint64(n[:], uint64(len(owners)))
	_, _ = d.Write(n[:])
	for _, o := range owners {
		write(o)
	}
	return max(d.Sum64(), 1) // zero means "unknown" on the wire
}

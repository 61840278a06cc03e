package ring_test

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/weirhq/weir/ring"
)

// fakeHasher places everything on a ring of small numbers, so a test can
// say exactly where each virtual node, partition and group lands:
//   - a virtual node key (member name, '#', index) hashes to vnodes[key];
//   - a group "g<n>" hashes to n, i.e. partition n mod PartitionCount;
//   - partition p (consistent hashes its 8-byte little-endian id) hashes
//     to p*100 + 10.
type fakeHasher struct {
	t      *testing.T
	vnodes map[string]uint64
}

func (f fakeHasher) Sum64(b []byte) uint64 {
	s := string(b)
	if h, ok := f.vnodes[s]; ok {
		return h
	}
	if n, ok := strings.CutPrefix(s, "g"); ok {
		if v, err := strconv.ParseUint(n, 10, 64); err == nil {
			return v
		}
	}
	if len(b) == 8 {
		return binary.LittleEndian.Uint64(b)*100 + 10
	}
	f.t.Errorf("fakeHasher: unexpected input %q", s)
	return 0
}

func TestRing_Owner_fakeHasher(t *testing.T) {
	// Partitions sit at 10, 110, 210, 310. Each is owned by the member of
	// the first virtual node at or after it, unless that member already
	// holds its cap ceil(floor(4/N) * 1.5), then by the next one along.
	tests := []struct {
		name    string
		members []string
		vnodes  map[string]uint64
		want    map[string]string // group -> owner
	}{
		{
			name:    "alternating virtual nodes",
			members: []string{"a", "b"},
			vnodes:  map[string]uint64{"a#0": 50, "a#1": 250, "b#0": 150, "b#1": 350},
			// partitions 0..3 -> a, b, a, b
			want: map[string]string{"g0": "a", "g1": "b", "g2": "a", "g3": "b", "g4": "a", "g7": "b"},
		},
		{
			name:    "bounded load spills to the next member",
			members: []string{"a", "b"},
			vnodes:  map[string]uint64{"a#0": 20, "a#1": 320, "b#0": 330, "b#1": 340},
			// every partition lands on a first; a's cap is 3, so partition
			// 3 (hash 310 -> a#1 at 320) spills to b#0 at 330.
			want: map[string]string{"g0": "a", "g1": "a", "g2": "a", "g3": "b", "g7": "b"},
		},
		{
			name:    "wraps past the top of the ring",
			members: []string{"a", "b"},
			vnodes:  map[string]uint64{"a#0": 5, "a#1": 6, "b#0": 200, "b#1": 300},
			// partitions 0..2 (10, 110, 210) go to b at 200 and 300;
			// partition 3 at 310 is past every virtual node and wraps to a#0.
			want: map[string]string{"g0": "b", "g1": "b", "g2": "b", "g3": "a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ring.Config{PartitionCount: 4, ReplicationFactor: 2, Load: 1.5, Hasher: fakeHasher{t, tt.vnodes}}
			r, err := ring.New(cfg, tt.members...)
			if err != nil {
				t.Fatal(err)
			}
			for g, want := range tt.want {
				if got, _ := r.Owner(g); got != want {
					t.Errorf("Owner(%q) = %q, want %q", g, got, want)
				}
			}
		})
	}
}

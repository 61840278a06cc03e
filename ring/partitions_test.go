package ring_test

import (
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/weirhq/weir/ring"
)

func TestRing_Partitions_agreeWithOwner(t *testing.T) {
	r, err := ring.New(ring.DefaultConfig(), "node-c", "node-a", "node-b")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := r.Partitions()
	if !ok {
		t.Fatal("default ring: Partitions not usable")
	}
	if len(p.Owners) != ring.DefaultConfig().PartitionCount || fmt.Sprint(p.Members) != "[node-a node-b node-c]" {
		t.Fatalf("partitions: %d owners, members %v", len(p.Owners), p.Members)
	}
	for i := range 5000 {
		g := fmt.Sprintf("tenant-%d", i)
		want, _ := r.Owner(g)
		got := p.Members[p.Owners[xxhash.Sum64String(g)%uint64(len(p.Owners))]]
		if got != want {
			t.Fatalf("group %q: Partitions place it on %s, Owner on %s", g, got, want)
		}
	}
}

func TestRing_Epoch_samePlacementSameEpoch(t *testing.T) {
	a, err := ring.New(ring.DefaultConfig(), "x", "y", "z")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ring.New(ring.DefaultConfig(), "z", "x")
	if err != nil {
		t.Fatal(err)
	}
	empty := b.Epoch()
	if a.Epoch() == b.Epoch() {
		t.Fatal("rings of different members share an epoch")
	}
	// b reaches the same members by another path: a different Version,
	// the same placement, the same epoch.
	for _, set := range [][]string{{"z"}, {"y", "z"}, {"z", "y", "x"}} {
		if err := b.Set(set); err != nil {
			t.Fatal(err)
		}
	}
	if a.Version() == b.Version() || a.Epoch() != b.Epoch() {
		t.Errorf("versions %d/%d, epochs %x/%x: want different versions, equal epochs",
			a.Version(), b.Version(), a.Epoch(), b.Epoch())
	}
	p, _ := a.Partitions()
	if p.Epoch != a.Epoch() || p.Epoch == 0 || empty == 0 {
		t.Errorf("Partitions().Epoch %x, Epoch() %x, empty ring %x: want equal and non-zero", p.Epoch, a.Epoch(), empty)
	}
	// Names that concatenate alike still differ.
	c, _ := ring.New(ring.DefaultConfig(), "ab", "c")
	d, _ := ring.New(ring.DefaultConfig(), "a", "bc")
	if c.Epoch() == d.Epoch() {
		t.Error("members [ab c] and [a bc] share an epoch")
	}
}

func TestRing_Partitions_customHasherRefused(t *testing.T) {
	cfg := ring.DefaultConfig()
	cfg.Hasher = fakeHasher{t: t}
	r, err := ring.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Partitions(); ok {
		t.Error("a ring with a custom hasher published its partitions")
	}
}

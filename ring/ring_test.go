package ring_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/weirhq/weir/ring"
)

func names(format string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i+1)
	}
	return out
}

func mustNew(t testing.TB, members ...string) *ring.Ring {
	t.Helper()
	r, err := ring.New(ring.DefaultConfig(), members...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

func owners(t testing.TB, r *ring.Ring, groups []string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(groups))
	for _, g := range groups {
		o, ok := r.Owner(g)
		if !ok {
			t.Fatalf("Owner(%q): empty ring", g)
		}
		out[g] = o
	}
	return out
}

func TestConfig_Validate(t *testing.T) {
	mod := func(f func(*ring.Config)) ring.Config {
		c := ring.DefaultConfig()
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		cfg     ring.Config
		wantErr bool
	}{
		{"default", ring.DefaultConfig(), false},
		{"zero partitions", mod(func(c *ring.Config) { c.PartitionCount = 0 }), true},
		{"one virtual node", mod(func(c *ring.Config) { c.ReplicationFactor = 1 }), true},
		{"load 1", mod(func(c *ring.Config) { c.Load = 1 }), true},
		{"load just above 1", mod(func(c *ring.Config) { c.Load = 1.01 }), false},
		{"nil hasher", mod(func(c *ring.Config) { c.Hasher = nil }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
			if _, nerr := ring.New(tt.cfg, "a"); (nerr != nil) != tt.wantErr {
				t.Fatalf("New() = %v, wantErr %v", nerr, tt.wantErr)
			}
		})
	}
}

func TestRing_Owner_empty(t *testing.T) {
	r := mustNew(t)
	if o, ok := r.Owner("tenant-1"); ok || o != "" {
		t.Fatalf("Owner on empty ring = %q, %v; want \"\", false", o, ok)
	}
	if m := r.Members(); len(m) != 0 {
		t.Fatalf("Members = %v, want none", m)
	}
	if err := r.Set(nil); err != nil || r.Version() != 0 {
		t.Fatalf("Set(nil) on empty ring: err %v, version %d; want no-op", err, r.Version())
	}
	if err := r.Set([]string{"a"}); err != nil {
		t.Fatal(err)
	}
	if o, ok := r.Owner("tenant-1"); !ok || o != "a" {
		t.Fatalf("Owner = %q, %v; want a, true", o, ok)
	}
	if err := r.Set([]string{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Owner("tenant-1"); ok || r.Version() != 2 {
		t.Fatalf("after emptying: ok %v, version %d; want false, 2", ok, r.Version())
	}
}

func TestRing_Owner_deterministicAcrossOrder(t *testing.T) {
	members := names("node-%d", 10)
	shuffled := slices.Clone(members)
	slices.Reverse(shuffled)
	shuffled = append(shuffled[5:], shuffled[:5]...)
	shuffled = append(shuffled, members[3], "") // duplicates and blanks are ignored

	groups := names("tenant-%04d", 10000)
	a, b := owners(t, mustNew(t, members...), groups), owners(t, mustNew(t, shuffled...), groups)
	for _, g := range groups {
		if a[g] != b[g] {
			t.Fatalf("Owner(%q): %q vs %q for the same members in another order", g, a[g], b[g])
		}
	}
}

func TestRing_Set_versionAndMembers(t *testing.T) {
	r := mustNew(t, "c", "a", "b")
	if got := r.Members(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Members = %v, want sorted [a b c]", got)
	}
	r.Members()[0] = "mutated"
	if r.Members()[0] != "a" {
		t.Fatal("Members returned the ring's own slice")
	}
	steps := []struct {
		set     []string
		version uint64
	}{
		{[]string{"b", "a", "c"}, 0},      // same set, other order: no-op
		{[]string{"a", "b", "c", "a"}, 0}, // duplicate: no-op
		{[]string{"a", "b"}, 1},
		{[]string{"a", "b", "d"}, 2},
		{[]string{"d", "b", "a"}, 2},
	}
	for i, s := range steps {
		if err := r.Set(s.set); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if r.Version() != s.version {
			t.Fatalf("step %d: Set(%v) version = %d, want %d", i, s.set, r.Version(), s.version)
		}
	}
}

func TestRing_Set_tooManyMembers(t *testing.T) {
	cfg := ring.DefaultConfig()
	cfg.PartitionCount = 3
	r, err := ring.New(cfg, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Set([]string{"a", "b", "c", "d"}); !errors.Is(err, ring.ErrTooManyMembers) {
		t.Fatalf("Set = %v, want ErrTooManyMembers", err)
	}
	if got := r.Members(); !slices.Equal(got, []string{"a", "b"}) || r.Version() != 0 {
		t.Fatalf("after failed Set: members %v version %d; want old ring", got, r.Version())
	}
	if _, err := ring.New(cfg, "a", "b", "c", "d"); !errors.Is(err, ring.ErrTooManyMembers) {
		t.Fatalf("New = %v, want ErrTooManyMembers", err)
	}
}

// TestRing_Owner_concurrentSet runs readers against a writer; run with -race.
func TestRing_Owner_concurrentSet(t *testing.T) {
	r := mustNew(t, "a", "b", "c")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if o, ok := r.Owner(fmt.Sprintf("g%d", i)); !ok || o == "" {
					t.Errorf("Owner = %q, %v during Set", o, ok)
					return
				}
			}
		})
	}
	for i := range 50 {
		if err := r.Set([]string{"a", "b", fmt.Sprintf("n%d", i%3)}); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
}

func BenchmarkRing_Owner(b *testing.B) {
	r := mustNew(b, names("node-%d", 10)...)
	groups := names("tenant-%04d", 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, ok := r.Owner(groups[i&1023]); !ok {
			b.Fatal("empty")
		}
	}
}

func BenchmarkRing_Owner_parallel(b *testing.B) {
	r := mustNew(b, names("node-%d", 10)...)
	groups := names("tenant-%04d", 1024)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			r.Owner(groups[i&1023])
		}
	})
}

func BenchmarkRing_Set(b *testing.B) {
	r := mustNew(b)
	sets := [][]string{names("node-%d", 10), names("node-%d", 9)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = r.Set(sets[i&1])
	}
}

func TestRing_OwnerAt_matchesOwnerAndEpoch(t *testing.T) {
	r, err := ring.New(ring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := r.OwnerAt("g"); ok {
		t.Fatal("an empty ring named an owner")
	}
	if err := r.Set([]string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"g1", "g2", "g3", "tenant-42"} {
		owner, epoch, ok := r.OwnerAt(g)
		want, _ := r.Owner(g)
		if !ok || owner != want || epoch != r.Epoch() {
			t.Fatalf("OwnerAt(%q) = %q, %d, %v; want %q, %d", g, owner, epoch, ok, want, r.Epoch())
		}
	}
}

package redisbackend_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
)

func TestBackend_cluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	cc := cl.ClusterClient()
	cnt := &counter{}
	cc.AddHook(cnt)
	b := newBackend(t, cc, 2*time.Second)
	ctx := t.Context()
	limits := []gcra.Limit{lim(200_000, 3), lim(100_000, 10)}

	t.Run("composite in one group", func(t *testing.T) {
		keys := []string{"rl:{tenant7}:all", "rl:{tenant7}:user:1"}
		for i, want := range []bool{true, true, true, false} {
			d, err := b.Decide(ctx, keys, limits, 1, base)
			if err != nil {
				t.Fatalf("decide %d: %v", i, err)
			}
			if d.Overall.Allowed != want {
				t.Errorf("decide %d allowed = %v, want %v", i, d.Overall.Allowed, want)
			}
		}
		if _, err := b.Decide(ctx, keys, limits, 1, 0); err != nil {
			t.Errorf("decide on server TIME: %v", err)
		}
	})

	t.Run("cross group sends nothing", func(t *testing.T) {
		before := cnt.n.Load()
		_, err := b.Decide(ctx, []string{"rl:{a}:x", "rl:{b}:x"}, limits, 1, base)
		if !errors.Is(err, redisbackend.ErrCrossSlot) {
			t.Fatalf("err = %v, want ErrCrossSlot", err)
		}
		if n := cnt.n.Load() - before; n != 0 {
			t.Errorf("%d commands sent", n)
		}
	})

	t.Run("persistence across groups", func(t *testing.T) {
		now, err := b.Time(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var tats []redisbackend.TAT
		var keys []string
		for g := range 200 {
			k := fmt.Sprintf("rl:{grp%d}:k", g)
			keys = append(keys, k)
			tat := now + int64(g)*10*ms - redisbackend.ExpiryGrace.Nanoseconds() // group 0 is past the grace: deleted
			tats = append(tats, redisbackend.TAT{Key: k, TAT: tat, Now: now})
		}
		if err := b.StoreTATs(ctx, tats); err != nil {
			t.Fatal(err)
		}
		got, err := b.LoadTATs(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		// PX is g*10ms+1ms (the grace cancels the offset above), so groups
		// from 50 on live at least half a second: ample for one round trip.
		for g := 50; g < 200; g++ {
			if got[g] != tats[g].TAT {
				t.Errorf("group %d: loaded %d, want %d", g, got[g], tats[g].TAT)
			}
		}
		if got[0] != 0 {
			t.Errorf("rested tat loaded as %d, want 0", got[0])
		}
	})

	t.Run("load batched per slot", func(t *testing.T) {
		now, err := b.Time(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Ten groups of three keys, and ten keys without a tag; each
		// MGET may read one slot only.
		var keys []string
		var tats []redisbackend.TAT
		slots := map[uint16]bool{}
		for g := range 10 {
			for _, name := range []string{fmt.Sprintf("rl:{lg%d}:a", g), fmt.Sprintf("rl:{lg%d}:b", g), fmt.Sprintf("rl:{lg%d}:c", g), fmt.Sprintf("plain%d", g)} {
				keys = append(keys, name)
				tats = append(tats, redisbackend.TAT{Key: name, TAT: now + int64(len(keys))*ms + 5*1000*ms, Now: now})
				slot := redisbackend.KeySlot(name)
				if want, err := cc.ClusterKeySlot(ctx, name).Result(); err != nil || int64(slot) != want {
					t.Fatalf("KeySlot(%q) = %d, CLUSTER KEYSLOT says %d (%v)", name, slot, want, err)
				}
				slots[slot] = true
			}
		}
		if err := b.StoreTATs(ctx, tats); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, "rl:{lg3}:missing")
		before := cnt.n.Load()
		got, err := b.LoadTATs(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		if n := cnt.n.Load() - before; n != int64(len(slots)) {
			t.Errorf("%d commands for %d keys in %d slots, want one MGET per slot", n, len(keys), len(slots))
		}
		for i, tat := range tats {
			if got[i] != tat.TAT {
				t.Errorf("%s: loaded %d, want %d", tat.Key, got[i], tat.TAT)
			}
		}
		if got[len(keys)-1] != 0 {
			t.Errorf("missing key loaded as %d", got[len(keys)-1])
		}
	})

	t.Run("pipelined across groups", func(t *testing.T) {
		var reqs []redisbackend.DecideRequest
		for g := range 64 {
			keys := []string{fmt.Sprintf("rl:{pg%d}:a", g), fmt.Sprintf("rl:{pg%d}:b", g)}
			reqs = append(reqs, redisbackend.DecideRequest{Keys: keys, Limits: limits, Cost: 1})
		}
		ds, errs, err := b.DecidePipelined(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range reqs {
			if errs[i] != nil || !ds[i].Overall.Allowed {
				t.Errorf("item %d: %v %+v", i, errs[i], ds[i].Overall)
			}
		}
	})
}

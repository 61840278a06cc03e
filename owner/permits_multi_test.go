package owner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
)

const concKey2 = "weir:{t1}:exports-per-user:t1:u1"

func twoSetRequest(now int64, keys [2]string, n [2]int64) *decide.Request {
	return &decide.Request{Group: "t1", Keys: keys[:], Defs: []*decide.Def{concDef, concDef}, Cost: 1, Now: now, Grant: &decide.Grant{},
		Limits: []gcra.Limit{{Burst: n[0], Interval: int64(time.Minute)}, {Burst: n[1], Interval: int64(time.Minute)}}}
}

// A request on two concurrency keys commits on both or neither, under one
// id: denied by one set, the other does not change.
func TestOwner_permits_twoSetsAllOrNothing(t *testing.T) {
	f, _ := newPermitPair(t, true, 0)
	keys := [2]string{concKey, concKey2}
	r := twoSetRequest(f.now(), keys, [2]int64{5, 1})
	if agg, err := f.o.Decide(t.Context(), r, make([]gcra.Result, 2)); err != nil || !agg.Allowed || r.Grant.InFlight[0] != 1 || r.Grant.InFlight[1] != 1 {
		t.Fatalf("first: %+v grant %+v, %v", agg, r.Grant, err)
	}
	r2 := twoSetRequest(f.now(), keys, [2]int64{5, 1})
	out := make([]gcra.Result, 2)
	if agg, err := f.o.Decide(t.Context(), r2, out); err != nil || agg.Allowed || !out[0].Allowed || out[1].Allowed {
		t.Fatalf("second: %+v %+v, %v; want denied by the second key only", agg, out, err)
	}
	if n, _, _, _ := f.o.Permits("t1", concKey, f.now()); n != 1 {
		t.Fatalf("the first key holds %d after a denial by the second, want 1", n)
	}
	if g, err := f.op(t, decide.OpRelease, r.Grant.Permit, 5, time.Minute, 0); err != nil || !g.Done {
		t.Fatalf("release: %+v, %v", g, err)
	}
	for _, k := range keys {
		if n, _, _, _ := f.o.Permits("t1", k, f.now()); n != 0 {
			t.Fatalf("%s holds %d after the release of the shared id", k, n)
		}
	}
}

// Concurrent requests naming the same two keys in both orders neither
// deadlock nor exceed either bound.
func TestOwner_permits_concurrentCompositesStayBounded(t *testing.T) {
	f, _ := newPermitPair(t, true, 0)
	const n = 3
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		toks [][]byte
	)
	for w := range 8 {
		wg.Go(func() {
			for range 30 {
				keys := [2]string{concKey, concKey2}
				if w%2 == 1 {
					keys = [2]string{concKey2, concKey}
				}
				r := twoSetRequest(f.now(), keys, [2]int64{n, n})
				agg, err := f.o.Decide(context.Background(), r, make([]gcra.Result, 2))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if agg.Allowed {
					toks = append(toks, r.Grant.Permit)
				}
				if len(toks) > 0 && w%3 == 0 { // some workers release one
					tok := toks[0]
					toks = toks[1:]
					mu.Unlock()
					f.op(t, decide.OpRelease, tok, n, time.Minute, 0)
				} else {
					mu.Unlock()
				}
				for _, k := range keys {
					if held, _, _, _ := f.o.Permits("t1", k, f.now()); held > n {
						t.Errorf("%s holds %d > %d", k, held, n)
					}
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{concKey, concKey2} {
		if held, _, _, _ := f.o.Permits("t1", k, f.now()); held != int64(len(toks)) {
			t.Fatalf("%s holds %d, %d tokens unreleased", k, held, len(toks))
		}
	}
}

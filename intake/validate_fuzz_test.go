package intake

import (
	"context"
	"testing"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/limitkey"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/policy"
)

// recordingHandler keeps the items a Validator let through.
type recordingHandler struct{ items []Item }

func (h *recordingHandler) HandleDecide(_ context.Context, _ string, items []Item) []Result {
	h.items = append(h.items, items...)
	return make([]Result, len(items))
}

// FuzzValidator decodes arbitrary bytes as a forwarded item, as the peer
// server does, and checks that whatever the Validator lets through is safe
// for the owner's core: now within the skew, a cost in range, limits within
// the policy's ranges, every key in the item's group; an op item of cost 0
// with a valid op on keys of the kinds it needs (the built-in policy has
// no concurrency limit: a release passes nowhere).
func FuzzValidator(f *testing.F) {
	const now = int64(1_700_000_000_000_000)
	seed := func(it Item) {
		b, err := peer.EncodeItem(it)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	ok := Item{Group: "t1", Keys: []string{"weir:{t1}:per-user:t1:u1"}, Limits: []gcra.Limit{{Interval: 200_000, Burst: 3}}, Cost: 1, Now: now}
	seed(ok)
	forged := ok
	forged.Now = 1<<63 - 1
	seed(forged)
	other := ok
	other.Keys = []string{"weir:{a%3Ab}:x:a%3Ab"}
	other.Group = "a:b"
	seed(other)
	settle := ok
	settle.Cost, settle.Op = 0, &decide.Op{Kind: decide.OpSettle, ID: [16]byte{1}, Actual: 2}
	seed(settle)
	release := settle
	release.Op = &decide.Op{Kind: decide.OpRelease, ID: [16]byte{1}}
	seed(release)
	reserve := ok
	reserve.Reserve = true
	seed(reserve)
	f.Add([]byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		it, err := peer.DecodeItem(data)
		if err != nil {
			return // the gRPC server refuses undecodable messages
		}
		h := &recordingHandler{}
		v, err := NewValidator(DefaultValidatorConfig(), h, staticPolicy{policy.Builtin()}, func() int64 { return now }, nil)
		if err != nil {
			t.Fatal(err)
		}
		rs := v.HandleDecide(t.Context(), "f", []Item{it})
		if len(rs) != 1 || (rs[0].Err == nil) != (len(h.items) == 1) {
			t.Fatalf("results %+v for %d items passed", rs, len(h.items))
		}
		for _, it := range h.items {
			skew := it.Now - now
			switch {
			case skew > DefaultMaxSkew.Nanoseconds() || skew < -DefaultMaxSkew.Nanoseconds():
				t.Fatalf("now %d passed, %dns off", it.Now, skew)
			case it.Op == nil && (it.Cost < 1 || it.Cost > limiter.MaxCost):
				t.Fatalf("cost %d passed", it.Cost)
			case it.Op != nil && (it.Cost != 0 || checkOp(&it) != nil):
				t.Fatalf("op %+v of cost %d passed", it.Op, it.Cost)
			case checkKinds(&it) != nil || len(it.Defs) != len(it.Keys):
				t.Fatalf("item %+v passed: %v", it, checkKinds(&it))
			case len(it.Keys) == 0 || len(it.Keys) != len(it.Limits):
				t.Fatalf("%d keys, %d limits passed", len(it.Keys), len(it.Limits))
			}
			for i, k := range it.Keys {
				if limitkey.HashTag(k) != limitkey.GroupTag(it.Group) {
					t.Fatalf("key %q passed for group %q", k, it.Group)
				}
				if it.Op != nil && it.Def(i) == nil {
					t.Fatalf("op key %q unknown to the policy passed", k)
				}
				if err := policy.CheckParams(it.Limits[i]); err != nil {
					t.Fatalf("limit passed: %v", err)
				}
			}
		}
	})
}

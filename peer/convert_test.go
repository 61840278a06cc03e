package peer

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
)

// randInt64 favours the edges: zero, ±1, the extremes, then anything.
func randInt64(r *rand.Rand) int64 {
	switch r.IntN(6) {
	case 0:
		return 0
	case 1:
		return int64(r.IntN(3)) - 1
	case 2:
		return []int64{-1 << 63, 1<<63 - 1, gcra.MaxSpan}[r.IntN(3)]
	default:
		return int64(r.Uint64())
	}
}

func randResult(r *rand.Rand) gcra.Result {
	return gcra.Result{
		Allowed: r.IntN(2) == 0, TooCostly: r.IntN(2) == 0,
		TAT: randInt64(r), RetryAfter: randInt64(r), Remaining: randInt64(r), ResetAfter: randInt64(r),
	}
}

// wire sends m through its binary encoding, as the network would.
func wire[M proto.Message](t *testing.T, m M, into M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
	return into
}

func TestConvert_gcraResultRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		want := randResult(r)
		if got := gcraFromProto(wire(t, gcraToProto(want), &peerv1.Result{})); got != want {
			t.Fatalf("round trip of %+v gave %+v", want, got)
		}
	}
}

func TestConvert_resultRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		want := Result{Overall: randResult(r), Results: make([]gcra.Result, r.IntN(4))}
		for i := range want.Results {
			want.Results[i] = randResult(r)
		}
		got := resultFromProto(wire(t, resultToProto(want), &peerv1.ItemResult{}))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip of %+v gave %+v", want, got)
		}
	}
}

func TestConvert_resultShapes(t *testing.T) {
	// Err wins over NotOwner wins over results; neither carries results.
	in := Result{Overall: gcra.Result{Allowed: true}, NotOwner: "n2", Err: errors.New("boom")}
	got := resultFromProto(wire(t, resultToProto(in), &peerv1.ItemResult{}))
	if got.NotOwner != "" || got.Results != nil || got.Overall != (gcra.Result{}) || got.Err.Error() != "peer: owner error: boom" {
		t.Fatalf("error shape: %+v", got)
	}
	in.Err = nil
	got = resultFromProto(wire(t, resultToProto(in), &peerv1.ItemResult{}))
	if !reflect.DeepEqual(got, Result{NotOwner: "n2"}) {
		t.Fatalf("not-owner shape: %+v", got)
	}
}

func TestConvert_itemRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		want := decide.Request{
			Group: "g", Cost: randInt64(r), Now: randInt64(r), Strict: r.IntN(2) == 0, Debt: r.IntN(2) == 0,
			Keys: []string{}, Limits: []gcra.Limit{},
		}
		for range r.IntN(4) {
			want.Keys = append(want.Keys, "k")
			want.Limits = append(want.Limits, gcra.Limit{Interval: randInt64(r), Burst: randInt64(r)})
		}
		got := itemFromProto(wire(t, itemToProto(want), &peerv1.Item{}))
		if got.Keys == nil {
			got.Keys = []string{} // proto does not tell nil from empty
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip of %+v gave %+v", want, got)
		}
	}
}

// TestConvert_mixedVersions: an older peer sends and reads microseconds
// only. A newer node reads them as nanoseconds*1000, and sends older peers
// microseconds they read as before: intervals rounded up (never a faster
// rate), now and TAT rounded down, waits rounded up.
func TestConvert_mixedVersions(t *testing.T) {
	old := &peerv1.Item{Group: "g", Keys: []string{"k"}, Cost: 1, NowUs: 1_700_000_000_000_000,
		Limits: []*peerv1.Limit{{IntervalUs: 333_334, Burst: 3}}}
	it := itemFromProto(wire(t, old, &peerv1.Item{}))
	if it.Now != 1_700_000_000_000_000_000 || it.Limits[0] != (gcra.Limit{Interval: 333_334_000, Burst: 3}) {
		t.Fatalf("item from an older sender: %+v", it)
	}
	it = decide.Request{Group: "g", Keys: []string{"k"}, Cost: 1, Now: 1_700_000_000_000_000_999,
		Limits: []gcra.Limit{{Interval: 1001, Burst: 3}}}
	p := wire(t, itemToProto(it), &peerv1.Item{})
	if p.GetNowUs() != 1_700_000_000_000_000 || p.GetLimits()[0].GetIntervalUs() != 2 {
		t.Fatalf("microseconds for an older owner: now %d interval %d", p.GetNowUs(), p.GetLimits()[0].GetIntervalUs())
	}
	if got := itemFromProto(p); !reflect.DeepEqual(got, it) {
		t.Fatalf("round trip %+v gave %+v", it, got)
	}

	oldRes := &peerv1.Result{Tat: 1_700_000_000_250_000, RetryAfterUs: 150_000, ResetAfterUs: 250_000}
	if got := gcraFromProto(wire(t, oldRes, &peerv1.Result{})); got.TAT != 1_700_000_000_250_000_000 ||
		got.RetryAfter != 150_000_000 || got.ResetAfter != 250_000_000 {
		t.Fatalf("result from an older owner: %+v", got)
	}
	r := gcra.Result{TAT: 1_700_000_000_250_000_500, RetryAfter: 1, ResetAfter: 1001}
	pr := gcraToProto(r)
	if pr.GetTat() != 1_700_000_000_250_000 || pr.GetRetryAfterUs() != 1 || pr.GetResetAfterUs() != 2 {
		t.Fatalf("microseconds for an older sender: %+v", pr)
	}
}

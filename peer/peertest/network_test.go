package peertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/peer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counter allows everything and counts the items it decided.
type counter struct{ n atomic.Int64 }

func (c *counter) HandleDecide(_ context.Context, _ string, items []decide.Request) []peer.Result {
	out := make([]peer.Result, len(items))
	for i, it := range items {
		c.n.Add(1)
		it.Keys[0] = "scribbled" // must not reach the caller's item
		out[i] = peer.Result{Overall: gcra.Result{Allowed: true, TAT: it.Now}}
	}
	return out
}

var it = decide.Request{Group: "g", Keys: []string{"k"}, Limits: []gcra.Limit{{Interval: 10, Burst: 1}}, Cost: 1, Now: 42}

func newNet() (*Network, map[string]*counter) {
	n := NewNetwork()
	hs := map[string]*counter{}
	for _, name := range []string{"a", "b", "c", "d"} {
		hs[name] = &counter{}
		n.Register(name, hs[name])
	}
	return n, hs
}

func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

func TestNetwork_Forwarder_delivers(t *testing.T) {
	n, hs := newNet()
	item := it
	item.Keys = []string{"k"}
	r, err := n.Forwarder("a").Decide(t.Context(), "b", item)
	if err != nil || !r.Overall.Allowed || r.Overall.TAT != 42 {
		t.Fatalf("got %+v, %v", r, err)
	}
	if hs["b"].n.Load() != 1 || n.Sent("a", "b") != 1 || n.Sent("b", "a") != 0 {
		t.Fatal("the call was not counted once on a->b")
	}
	if item.Keys[0] != "k" {
		t.Fatal("the handler aliased the caller's keys")
	}
}

func TestNetwork_Forwarder_unknownNode(t *testing.T) {
	n, _ := newNet()
	n.Unregister("d")
	if _, err := n.Forwarder("a").Decide(t.Context(), "d", it); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("err = %v, want ErrUnknownNode", err)
	}
}

func TestNetwork_Drop(t *testing.T) {
	n, hs := newNet()
	n.Drop("a", "b")
	if _, err := n.Forwarder("a").Decide(t.Context(), "b", it); !errors.Is(err, ErrDropped) {
		t.Fatalf("a->b: err = %v, want ErrDropped", err)
	}
	if hs["b"].n.Load() != 0 {
		t.Fatal("b decided a dropped request")
	}
	if _, err := n.Forwarder("c").Decide(t.Context(), "b", it); err != nil {
		t.Fatalf("c->b is untouched: %v", err)
	}
	n.Heal("a", "b")
	if _, err := n.Forwarder("a").Decide(t.Context(), "b", it); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

func TestNetwork_Drop_answerPathDecidesButFails(t *testing.T) {
	n, hs := newNet()
	n.Drop("b", "a")
	if _, err := n.Forwarder("a").Decide(t.Context(), "b", it); !errors.Is(err, ErrDropped) {
		t.Fatalf("err = %v, want ErrDropped", err)
	}
	if hs["b"].n.Load() != 1 {
		t.Fatal("b should have decided before the answer was lost")
	}
}

func TestNetwork_Blackhole(t *testing.T) {
	n, hs := newNet()
	n.Blackhole("a", "b")
	start := time.Now()
	_, err := n.Forwarder("a").Decide(shortCtx(t), "b", it)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("returned after %v, before the deadline", d)
	}
	if hs["b"].n.Load() != 0 {
		t.Fatal("b decided a blackholed request")
	}
}

func TestNetwork_Partition(t *testing.T) {
	n, _ := newNet()
	n.Partition([]string{"a", "b"}, []string{"c", "d"})
	for _, tc := range []struct {
		from, to string
		cut      bool
	}{
		{"a", "b", false}, {"c", "d", false}, {"d", "c", false},
		{"a", "c", true}, {"c", "a", true}, {"b", "d", true}, {"d", "b", true},
	} {
		_, err := n.Forwarder(tc.from).Decide(shortCtx(t), tc.to, it)
		if cut := errors.Is(err, context.DeadlineExceeded); cut != tc.cut || (!cut && err != nil) {
			t.Fatalf("%s->%s: err = %v, want cut=%v", tc.from, tc.to, err, tc.cut)
		}
	}
	n.HealAll()
	if _, err := n.Forwarder("a").Decide(t.Context(), "c", it); err != nil {
		t.Fatalf("after HealAll: %v", err)
	}
}

func TestNetwork_Delay(t *testing.T) {
	n, _ := newNet()
	const d = 5 * time.Millisecond
	n.Delay("a", "b", d)
	start := time.Now()
	if _, err := n.Forwarder("a").Decide(t.Context(), "b", it); err != nil {
		t.Fatal(err)
	}
	if e := time.Since(start); e < d {
		t.Fatalf("returned after %v, want at least %v", e, d)
	}
	n.Delay("a", "b", time.Hour)
	if _, err := n.Forwarder("a").Decide(shortCtx(t), "b", it); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a delay past the deadline: err = %v", err)
	}
	n.Heal("a", "b")
	if _, err := n.Forwarder("a").Decide(shortCtx(t), "b", it); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

func TestNetwork_Forwarder_doneContext(t *testing.T) {
	n, hs := newNet()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := n.Forwarder("a").Decide(ctx, "b", it); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if hs["b"].n.Load() != 0 {
		t.Fatal("decided for a caller already gone")
	}
}

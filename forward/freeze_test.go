package forward

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/owner"
)

// blockingFlush holds every FlushKeys until release is closed, as a
// write-behind flushing to a slow Redis would.
type blockingFlush struct {
	owner.WriteBehind
	entered chan struct{}
	release chan struct{}
}

func (b *blockingFlush) FlushKeys(ctx context.Context, match func(string) bool) error {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.WriteBehind.FlushKeys(ctx, match)
}

// startHeartbeat runs n's heartbeat (the router's loop over the owner's
// Beat) until the test ends.
func startHeartbeat(t *testing.T, n *testNode) {
	ctx, cancel := context.WithCancel(context.Background())
	hb := make(chan error, 1)
	go func() { hb <- n.router.RunHeartbeat(ctx) }()
	t.Cleanup(func() { cancel(); <-hb })
	waitFor(t, func() bool { return n.owner.Beating() })
}

// spendElsewhere writes TATs ten seconds ahead for kv's two keys, as if
// peers had spent the whole burst while this node was frozen.
func spendElsewhere(t *testing.T, tc *testCluster) {
	t.Helper()
	later := strconv.FormatInt((tc.clock.Nanos()+int64(10*time.Second))/1000, 10) // stored as whole microseconds
	for _, k := range []string{"weir:{t1}:per-user:t1:u1", "weir:{t1}:per-tenant:t1"} {
		if err := tc.redis.Client().Set(context.Background(), k, later, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// An owner frozen past the freeze limit (SIGSTOP, a paused VM) must not
// decide from the memory it had before: its peers may have decided its
// groups meanwhile. It reloads from Redis, which keeps the later TAT; and
// the reload never holds a caller: while it flushes, fast decisions fall
// back at once with reason "thawing".
func TestRouter_frozenOwnerThawsOffTheRequestPath(t *testing.T) {
	flush := &blockingFlush{entered: make(chan struct{}, 1), release: make(chan struct{})}
	tc := newTestClusterWith(t, 1, true, func(tc *testCluster) {
		tc.ownerClock = tc.clock // freezes are measured on the fake clock
		tc.wrapWB = func(wb owner.WriteBehind) owner.WriteBehind { flush.WriteBehind = wb; return flush }
	})
	c := tc.nodes["node-0"]
	released := false
	release := func() {
		if !released {
			released = true
			close(flush.release)
		}
	}
	t.Cleanup(release)
	startHeartbeat(t, c)

	kv := map[string]string{"tenant": "t1", "user": "u1"}
	if d := tc.decide("node-0", kv); !d.Allowed {
		t.Fatalf("first decision denied: %+v", d)
	}
	spendElsewhere(t, tc)
	// Not frozen: the owner trusts its memory.
	if d := tc.decide("node-0", kv); !d.Allowed {
		t.Fatalf("unfrozen owner did not decide from memory: %+v", d)
	}
	tc.clock.Add(2 * time.Second) // the process slept through two seconds

	got := make(chan limiter.Decision, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		d, _ := tc.nodes["node-0"].lim.Decide(ctx, limiter.Request{Descriptors: kv, Cost: 1})
		got <- d
	}()
	var d limiter.Decision
	select {
	case d = <-got:
	case <-time.After(5 * time.Second):
		release()
		t.Fatal("a decision waited on the thaw's flush")
	}
	if d.Fallback == nil || d.Fallback.Reason != "thawing" {
		t.Fatalf("decision while thawing: %+v, want a fallback with reason thawing", d)
	}
	<-flush.entered // the heartbeat is flushing
	release()
	waitFor(t, func() bool { return !c.owner.Thawing() })
	if d := tc.decide("node-0", kv); d.Allowed || d.Fallback != nil {
		t.Fatalf("a thawed owner decided from its stale memory: %+v", d)
	}
	if got := tc.metric("node-0", "weir_freezes_total"); got != 1 {
		t.Fatalf("weir_freezes_total = %v, want 1", got)
	}
}

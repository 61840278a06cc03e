package main

import (
	"context"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

func (p *proc) acquire(t *testing.T, tenant string) *weirv1.DecideResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := p.client.Decide(ctx, &weirv1.DecideRequest{Descriptors: map[string]string{"tenant": tenant, "op": "export"}})
	if err != nil {
		t.Fatalf("acquire at %s: %v", p.name, err)
	}
	return r
}

func (p *proc) release(t *testing.T, permit []byte) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := p.client.Release(ctx, &weirv1.ReleaseRequest{Permit: permit})
	if err != nil {
		t.Fatalf("release at %s: %v", p.name, err)
	}
	return r.GetReleased()
}

// TestConcurrency_process_threeNodesAndOwnerKilled: permits taken through
// every node of three (forwarded to the tenant's owner) are bounded
// together; a release through another node frees a slot; when the owner
// is SIGKILLed the survivors' new owner loads the live permits from
// Redis, so the bound still holds and the old permits still release. A
// reservation made through one survivor settles through the other.
func TestConcurrency_process_threeNodesAndOwnerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three node processes and waits for failure detection")
	}
	tr := startTrio(t, concurrencyPolicy)
	owner, others := tr.split("t1")
	order := []*proc{others[0], others[1], owner}
	var permits [][]byte
	for i, p := range order {
		d := p.acquire(t, "t1")
		if !d.Allowed || len(d.Permit) == 0 || d.Fallback != nil {
			t.Fatalf("acquire %d through %s: %+v", i, p.name, d)
		}
		permits = append(permits, d.Permit)
	}
	for _, p := range tr.nodes {
		if d := p.acquire(t, "t1"); d.Allowed || d.Fallback != nil || d.GetLimits()[0].GetInFlight() != 3 {
			t.Fatalf("a fourth permit through %s: %+v, want a normal denial with 3 in flight", p.name, d)
		}
	}
	if !others[1].release(t, permits[0]) { // taken through others[0]
		t.Fatal("release through another node than the acquire's: not released")
	}
	d := owner.acquire(t, "t1")
	if !d.Allowed || len(d.Permit) == 0 {
		t.Fatalf("acquire after release: %+v", d)
	}
	permits[0] = d.Permit

	owner.kill()
	waitMembers(t, 30*time.Second, 2, others...)
	for _, p := range others {
		if d := p.acquire(t, "t1"); d.Allowed || d.Fallback != nil {
			t.Fatalf("after the owner died, %s answered %+v: want a normal denial (3 permits live in Redis)", p.name, d)
		}
	}
	if !others[0].release(t, permits[1]) {
		t.Fatal("a permit taken before the owner died did not release at the new owner")
	}
	if d := others[1].acquire(t, "t1"); !d.Allowed || len(d.Permit) == 0 {
		t.Fatalf("acquire after releasing at the new owner: %+v", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := others[0].client.Decide(ctx, &weirv1.DecideRequest{Descriptors: map[string]string{"tenant": "t2", "model": "m"}, Cost: new(int64(100)), Reserve: true})
	if err != nil || !res.Allowed || len(res.Reservation) == 0 {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	st, err := others[1].client.Settle(ctx, &weirv1.SettleRequest{Reservation: res.Reservation, Actual: 40})
	if err != nil || !st.Settled || st.Refunded != 60 {
		t.Fatalf("settle through the other survivor: %+v %v, want 60 refunded", st, err)
	}
	if st, err := others[0].client.Settle(ctx, &weirv1.SettleRequest{Reservation: res.Reservation, Actual: 40}); err != nil || st.Settled {
		t.Fatalf("second settle: %+v %v, want settled: false", st, err)
	}
}

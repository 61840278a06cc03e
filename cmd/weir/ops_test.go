package main

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/server/servertest"
)

// opsNode hands out one permit, or one reservation for a reserve, and
// answers Release, Renew and Settle for the live ones (token bytes as
// names), as an owner does: once released or settled, not held.
type opsNode struct {
	weirv1.UnimplementedRateLimiterServer
	mu   sync.Mutex
	live map[string]bool
}

func (n *opsNode) Decide(_ context.Context, r *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	resp := &weirv1.DecideResponse{Allowed: true, Matched: true}
	if r.GetReserve() {
		resp.Reservation = []byte("reservation-1")
	} else {
		resp.Permit = []byte("permit-1")
	}
	n.live[string(resp.GetPermit())+string(resp.GetReservation())] = true
	return resp, nil
}

func (n *opsNode) take(tok []byte) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	held := n.live[string(tok)]
	delete(n.live, string(tok))
	return held
}

func (n *opsNode) Release(_ context.Context, r *weirv1.ReleaseRequest) (*weirv1.ReleaseResponse, error) {
	return &weirv1.ReleaseResponse{Released: n.take(r.GetPermit())}, nil
}

func (n *opsNode) Renew(_ context.Context, r *weirv1.RenewRequest) (*weirv1.RenewResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.live[string(r.GetPermit())] {
		return &weirv1.RenewResponse{}, nil
	}
	return &weirv1.RenewResponse{Renewed: true, ExpiresIn: r.GetTtl()}, nil
}

func (n *opsNode) Settle(_ context.Context, r *weirv1.SettleRequest) (*weirv1.SettleResponse, error) {
	if !n.take(r.GetReservation()) {
		return &weirv1.SettleResponse{}, nil
	}
	return &weirv1.SettleResponse{Settled: true, Refunded: 10 - r.GetActual()}, nil
}

func tokenLine(t *testing.T, out, field string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s line in:\n%s", field, out)
	}
	return m[1]
}

func TestRunOp_releaseRenewSettle(t *testing.T) {
	addr := servertest.Serve(t, &opsNode{live: map[string]bool{}})
	ctx := t.Context()
	_, out, _ := runCLI(ctx, "decide", "--addr", addr, "-d", "tenant=acme")
	permit := tokenLine(t, out, "permit")
	_, out, _ = runCLI(ctx, "decide", "--addr", addr, "-d", "tenant=acme", "--reserve", "--cost", "10")
	reservation := tokenLine(t, out, "reservation")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"renew", "--ttl", "5s", permit}, exitOK, "renewed: expires in 5s\n"},
		{[]string{"release", permit}, exitOK, "released\n"},
		{[]string{"release", permit}, exitNo, "not held: the owner has no such permit"},
		{[]string{"renew", permit}, exitNo, "not held"},
		{[]string{"settle", "--actual", "3", reservation}, exitOK, "settled: refunded 7, extra 0, forgiven 0\n"},
		{[]string{"settle", "--actual", "3", reservation}, exitNo, "no such reservation"},
	} {
		args := append([]string{tc.args[0], "--addr", addr}, tc.args[1:]...)
		code, stdout, stderr := runCLI(ctx, args...)
		if code != tc.code || !strings.Contains(stdout, tc.want) {
			t.Errorf("weir %v: exit %d, stdout %q (stderr %q); want %d, %q", tc.args, code, stdout, stderr, tc.code, tc.want)
		}
	}
}

func TestRunOp_usageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"release"},
		{"release", "a", "b"},
		{"release", "not base64!"},
		{"settle", "cGVybWl0"},
		{"release", "--actual", "3", "cGVybWl0"},
		{"settle", "--ttl", "1s", "--actual", "1", "cGVybWl0"},
		{"renew", "--ttl", "-1s", "cGVybWl0"},
	} {
		if code, _, stderr := runCLI(t.Context(), args...); code != exitError || stderr == "" {
			t.Errorf("weir %v: exit %d, stderr %q; want a usage error", args, code, stderr)
		}
	}
}

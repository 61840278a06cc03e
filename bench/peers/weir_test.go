package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weirhq/weir/policy"
)

func TestWeirPolicy_loadsWithEveryLimit(t *testing.T) {
	p, err := policy.Parse("bench", []byte(weirPolicy))
	if err != nil {
		t.Fatalf("the bench's policy does not load: %v\n%s", err, weirPolicy)
	}
	m, ok := p.ResolveEnvoy(rlsDomain, []policy.EnvoyEntry{{Key: leasedEntry, Value: "key-0"}})
	if !ok || m.Key != leasedKey || m.Limit.Lease == nil || m.Limit.Lease.Max != leasedMax {
		t.Errorf("leased descriptor resolves to %+v (ok %v), want %s with lease max %d", m, ok, leasedKey, leasedMax)
	}
	if m, ok := p.ResolveEnvoy(rlsDomain, []policy.EnvoyEntry{{Key: rlsKey, Value: "k"}}); !ok || m.Limit.Lease != nil || m.Limit.Name != "bench-key" {
		t.Errorf("plain descriptor resolves to %+v (ok %v), want bench-key without lease", m, ok)
	}
	ms, err := p.Resolve(map[string]string{rlsKey: "k"}, nil)
	if err != nil || len(ms) != 1 || ms[0].Limit.Name != weirV1Limit {
		t.Errorf("weir.v1 {key: k} resolves to %+v, %v; want %s only", ms, err, weirV1Limit)
	}
	if ws := p.LeaseWarnings(3); len(ws) != 0 {
		t.Errorf("lease warnings for 3 nodes: %v (the leased row would not lease)", ws)
	}
}

// inspectNode serves /admin/inspect answering held for every key.
func inspectNode(t *testing.T, held bool, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/admin/inspect" || r.URL.Query().Get("key") != leasedKey {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusBadRequest)
			return
		}
		if status != http.StatusOK {
			http.Error(w, "broken", status)
			return
		}
		_ = json.NewEncoder(w).Encode([]map[string]any{{"key": leasedKey, "held": held}})
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestFindOwner(t *testing.T) {
	ctx := context.Background()
	no, yes := inspectNode(t, false, http.StatusOK), inspectNode(t, true, http.StatusOK)
	if got, err := findOwner(ctx, []string{no, yes, no}, leasedKey); err != nil || got != 1 {
		t.Errorf("findOwner = %d, %v; want node 1", got, err)
	}
	for name, admins := range map[string][]string{
		"none holds":  {no, no},
		"two hold":    {yes, no, yes},
		"node fails":  {yes, inspectNode(t, false, http.StatusInternalServerError)},
		"unreachable": {"127.0.0.1:1"},
	} {
		if got, err := findOwner(ctx, admins, leasedKey); err == nil {
			t.Errorf("%s: findOwner = %d, want an error", name, got)
		}
	}
}

func TestLeasedRow(t *testing.T) {
	if leasedRow(0) != "leasable hot key via the owner" || leasedRow(2) != "leasable hot key via non-owner 2" {
		t.Errorf("rows %q, %q", leasedRow(0), leasedRow(2))
	}
	if leasedKey != "weir:{key-0}:bench-leased:key-0" {
		t.Errorf("leasedKey %q", leasedKey)
	}
}

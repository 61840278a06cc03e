package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/shadow"
)

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

const adminPolicy = `
version: admin.1
limits:
  - {name: per-user, match: [tenant, user], group: tenant, rate: 1/m, burst: 3}
  - {name: new-route, match: [tenant, route], group: tenant, rate: 1/m, burst: 1, shadow: true}
`

func TestNode_adminEndpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(adminPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	n, c := startNode(t, "--policy", path, "--node-name", "n1")
	base := "http://" + n.httpAddr()
	for range 3 {
		decide(t, c, 1, "tenant", "a:b", "route", "/r")
	}
	first := decide(t, c, 1, "tenant", "a:b", "user", "u")

	var rep shadow.Report
	if code := getJSON(t, base+shadow.Path+"?since=1h", &rep); code != http.StatusOK {
		t.Fatalf("shadow: %d", code)
	}
	if len(rep.Limits) != 1 || rep.Limits[0].WouldDeny != 2 || rep.Limits[0].Top[0].Count != 2 {
		t.Fatalf("shadow report = %+v", rep)
	}

	var st admin.Status
	if code := getJSON(t, base+admin.StatusPath, &st); code != http.StatusOK {
		t.Fatalf("status: %d", code)
	}
	if st.Node != "n1" || st.PolicyVersion != "admin.1" || st.Figures["weir_decisions_total"] != 4 {
		t.Fatalf("status = %+v", st)
	}

	// Inspect twice: read-only, so both answers agree with the decision.
	key := first.Limits[0].Key
	for range 2 {
		var ks []admin.KeyState
		if code := getJSON(t, base+admin.InspectPath+"?key="+url.QueryEscape(key)+"&key=weir:{zz}:per-user:zz:q&key=nonsense", &ks); code != http.StatusOK {
			t.Fatalf("inspect: %d", code)
		}
		if len(ks) != 3 || !ks[0].Held || ks[0].Remaining != 2 || ks[0].Burst != 3 || ks[0].RetryAfterUS != 0 || ks[0].ResetAfterUS <= 0 {
			t.Fatalf("inspect %s = %+v", key, ks[0])
		}
		if ks[1].Held || ks[2].Error == "" {
			t.Fatalf("inspect others = %+v", ks[1:])
		}
	}
	if r := decide(t, c, 1, "tenant", "a:b", "user", "u"); r.Remaining != 1 {
		t.Fatalf("after inspecting, remaining %d, want 1: inspect consumed quota", r.Remaining)
	}
	if code := getJSON(t, base+admin.InspectPath, new(any)); code != http.StatusBadRequest {
		t.Fatalf("inspect without keys: %d", code)
	}
}

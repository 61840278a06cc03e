package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/shadow"
)

// shadowNode serves a real shadow recorder that saw the given would-denies.
func shadowNode(t *testing.T, denied ...string) string {
	t.Helper()
	rec, err := shadow.New(shadow.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range denied {
		rec.Observe(limiter.Decision{Allowed: true, Limits: []limiter.LimitDecision{{Name: "new-limit", Key: key, Shadow: true}}})
	}
	srv := httptest.NewServer(rec.Handler(t.Name()))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// jsonNode serves v at path, as a node's admin endpoint would.
func jsonNode(t *testing.T, path string, v any) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) { json.NewEncoder(w).Encode(v) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestRunShadow_mergesNodes(t *testing.T) {
	a := shadowNode(t, "k1", "k1", "k2")
	b := shadowNode(t, "k1", "k3")
	code, stdout, stderr := runCLI(t.Context(), "shadow", "--addr", a+","+b, "--since", "1h", "--top", "2")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"2 nodes", "new-limit", "5", "k1", "3"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "k3") && strings.Contains(stdout, "k2") {
		t.Errorf("--top 2 showed three keys:\n%s", stdout)
	}
	code, stdout, _ = runCLI(t.Context(), "shadow", "--addr", a+","+b, "--json")
	var rep shadow.Report
	if code != exitOK || json.Unmarshal([]byte(stdout), &rep) != nil || rep.Limits[0].WouldDeny != 5 || rep.Limits[0].Top[0] != (shadow.Count{Key: "k1", Count: 3}) {
		t.Fatalf("json: exit %d, %+v", code, rep)
	}
}

func TestRunShadow_nodeDown(t *testing.T) {
	a := shadowNode(t, "k1")
	code, stdout, stderr := runCLI(t.Context(), "shadow", "--addr", a+",127.0.0.1:1")
	if code != exitOK || !strings.Contains(stdout, "1 nodes") || !strings.Contains(stderr, "127.0.0.1:1") {
		t.Errorf("one node down: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, _ := runCLI(t.Context(), "shadow", "--addr", "127.0.0.1:1"); code != exitError {
		t.Errorf("all nodes down: exit %d, want 2", code)
	}
}

func TestRunStatus(t *testing.T) {
	st := func(name, version string) admin.Status {
		return admin.Status{Node: name, PolicyVersion: version, Members: []string{"a", "b"},
			Breakers: map[string]string{"redis": "closed", "peer:b": "open"},
			Figures:  map[string]float64{"weir_decisions_total": 42, "weir_lease_grants_total": 7}}
	}
	a, b := jsonNode(t, admin.StatusPath, st("a", "v1")), jsonNode(t, admin.StatusPath, st("b", "v2"))
	code, stdout, stderr := runCLI(t.Context(), "status", "--addr", a+","+b)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"NODE", "peer:b=open", "42", "different policy versions", "weir_lease_grants_total=7", "%"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	var v statusView
	if code, stdout, _ = runCLI(t.Context(), "status", "--addr", a, "--json"); code != exitOK || json.Unmarshal([]byte(stdout), &v) != nil {
		t.Fatalf("json: %d %s", code, stdout)
	}
	if sum := v.RingShare["a"] + v.RingShare["b"]; sum < 0.999 || v.RingShare["a"] < 0.2 || v.RingShare["b"] < 0.2 {
		t.Errorf("ring share %v", v.RingShare)
	}
}

func TestRunInspect_picksTheHolder(t *testing.T) {
	const key = "weir:{t}:per-user:t:u"
	notHeld := jsonNode(t, admin.InspectPath, []admin.KeyState{{Key: key, Limit: "per-user", Burst: 3}})
	holder := jsonNode(t, admin.InspectPath, []admin.KeyState{{Key: key, Limit: "per-user", Held: true, TAT: 1, Remaining: 2, Burst: 3, ResetAfterUS: 200_000}})
	code, stdout, stderr := runCLI(t.Context(), "inspect", "--addr", notHeld+","+holder, "--json", key)
	var out []inspected
	if code != exitOK || json.Unmarshal([]byte(stdout), &out) != nil {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	if len(out) != 1 || !out[0].Held || out[0].Node != holder || out[0].Remaining != 2 {
		t.Errorf("got %+v", out)
	}
	if code, stdout, _ := runCLI(t.Context(), "inspect", "--addr", notHeld+","+holder, key); code != exitOK || !strings.Contains(stdout, "2/3") || !strings.Contains(stdout, "200ms") {
		t.Errorf("table: %d\n%s", code, stdout)
	}
	if code, _, _ := runCLI(t.Context(), "inspect", "--addr", holder); code != exitError {
		t.Errorf("no keys: exit %d, want 2", code)
	}
}

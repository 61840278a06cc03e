package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/shadow"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	return getJSONWith(t, http.DefaultClient, url, v)
}

func getJSONWith(t *testing.T, c *http.Client, url string, v any) int {
	t.Helper()
	resp, err := c.Get(url)
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
tiers:
  big: {per-user: {rate: 1/m, burst: 10}}
tenants:
  big: {tier: big}
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
	base := "http://" + n.adminAddr()
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
	// A tenant on a tier is inspected with its own numbers, not the limit's
	// defaults.
	big := decide(t, c, 1, "tenant", "big", "user", "u")
	var bks []admin.KeyState
	if code := getJSON(t, base+admin.InspectPath+"?key="+url.QueryEscape(big.Limits[0].Key), &bks); code != http.StatusOK {
		t.Fatalf("inspect: %d", code)
	}
	if len(bks) != 1 || bks[0].Burst != 10 || bks[0].Remaining != big.Remaining {
		t.Fatalf("inspect of a tier tenant = %+v, want burst 10 and remaining %d", bks, big.Remaining)
	}
	if code := getJSON(t, base+"/metrics", new(any)); code != http.StatusNotFound {
		t.Fatalf("/metrics on the admin listener: %d, want 404 (it stays on the public one)", code)
	}
}

// TestNode_adminNotOnPublicPort: the admin endpoints read other tenants'
// keys and state (issue 11), so the public HTTP port must not serve them.
func TestNode_adminNotOnPublicPort(t *testing.T) {
	n, _ := startNode(t)
	public := "http://" + n.httpAddr()
	for _, p := range []string{admin.StatusPath, shadow.Path, admin.InspectPath + "?key=weir:{a}:per-user:a:u"} {
		if code := getJSON(t, public+p, new(any)); code != http.StatusNotFound {
			t.Errorf("GET %s on the public port: %d, want 404", p, code)
		}
		if code := getJSON(t, "http://"+n.adminAddr()+p, new(any)); code != http.StatusOK {
			t.Errorf("GET %s on the admin port: %d, want 200", p, code)
		}
	}
}

// The profiler is the operators': on the admin listener, not the public one.
func TestNode_pprofOnlyOnAdminPort(t *testing.T) {
	n, _ := startNode(t)
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("http://" + n.httpAddr() + "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ on the public port: %d, want 404", code)
	}
	if code, body := get("http://" + n.adminAddr() + "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/ on the admin port: %d, want 200 and the profile index", code)
	}
	if code, body := get("http://" + n.adminAddr() + "/debug/pprof/profile?seconds=1"); code != http.StatusOK || len(body) == 0 {
		t.Errorf("a 1s CPU profile on the admin port: %d, %d bytes", code, len(body))
	}
}

func TestNode_adminDisabled(t *testing.T) {
	n, err := launch(t, "--admin-addr", "")
	if err != nil {
		t.Fatal(err)
	}
	if a := n.adminAddr(); a != "" {
		t.Fatalf("--admin-addr \"\" still listens on %s", a)
	}
}

func TestNode_refusesExposedPlaintextAdmin(t *testing.T) {
	if _, err := launch(t, "--admin-addr", "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "--admin-addr") {
		t.Fatalf("a plaintext admin listener on every interface started: %v", err)
	}
	n, err := launch(t, "--admin-addr", "0.0.0.0:0", "--insecure-peer")
	if err != nil {
		t.Fatal(err)
	}
	if v := metric(t, http.DefaultClient, "http://"+n.httpAddr(), `weir_insecure_listeners{listener="admin"}`); v != "1" {
		t.Fatalf(`weir_insecure_listeners{listener="admin"} = %q, want 1`, v)
	}
	safe, err := launch(t)
	if err != nil {
		t.Fatal(err)
	}
	if v := metric(t, http.DefaultClient, "http://"+safe.httpAddr(), `weir_insecure_listeners{listener="admin"}`); v != "0" {
		t.Fatalf(`on loopback weir_insecure_listeners{listener="admin"} = %q, want 0`, v)
	}
}

// TestNode_adminMTLS: with the peer mTLS material the admin listener is
// HTTPS, off loopback too, and answers only clients with a certificate from
// the peer CA.
func TestNode_adminMTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cluster")
	nodeFiles := ca.WriteFiles(t, dir, "node", "node", "127.0.0.1")
	n, err := launch(t, "--admin-addr", "0.0.0.0:0", "--peer-tls-cert", nodeFiles.Cert, "--peer-tls-key", nodeFiles.Key, "--peer-tls-ca", nodeFiles.CA)
	if err != nil {
		t.Fatal(err)
	}
	url := adminStatusURL(t, n)
	client := func(cert, key string) *http.Client { return adminClient(t, cert, key, nodeFiles.CA) }

	op := ca.WriteFiles(t, dir, "operator", "operator")
	var st admin.Status
	if code := getJSONWith(t, client(op.Cert, op.Key), url, &st); code != http.StatusOK || st.Node == "" {
		t.Fatalf("operator with a cluster certificate: %d %+v", code, st)
	}
	if _, err := client("", "").Get(url); err == nil {
		t.Fatal("a client without a certificate was answered")
	}
	other := tlstest.NewCA(t, "outsider").WriteFiles(t, dir, "outsider", "outsider")
	if _, err := client(other.Cert, other.Key).Get(url); err == nil {
		t.Fatal("a client with a certificate from another CA was answered")
	}
	// Plaintext HTTP to the TLS listener gets net/http's 400, never an
	// admin answer.
	if resp, err := http.Get("http://" + strings.TrimPrefix(url, "https://")); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plaintext HTTP was answered on the mTLS admin listener")
		}
	}
	if v := metric(t, http.DefaultClient, "http://"+n.httpAddr(), `weir_insecure_listeners{listener="admin"}`); v != "0" {
		t.Fatalf(`with mTLS weir_insecure_listeners{listener="admin"} = %q, want 0`, v)
	}
}

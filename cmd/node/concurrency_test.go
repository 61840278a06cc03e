package main

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/weirhq/weir/admin"
)

// concurrencyPolicy has a concurrency limit (3 exports in flight per
// tenant) and a rate limit to reserve against (100/m, burst 100: a unit
// every 600 ms, so a refund right after a reservation is never capped by
// time passing on a slow machine).
const concurrencyPolicy = `version: conc-test
limits:
  - name: exports
    kind: concurrency
    match: [tenant, op]
    max_in_flight: 3
    ttl: 30s
    on_failure: closed
  - name: tokens
    match: [tenant, model]
    rate: 100/m
    burst: 100
`

// post sends body to the node's HTTP API at path and decodes the JSON
// answer; it returns the status code.
func post(t *testing.T, httpAddr, path, body string, out any) int {
	t.Helper()
	resp, err := http.Post("http://"+httpAddr+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && (resp.StatusCode < 300 || resp.StatusCode == http.StatusTooManyRequests) {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("POST %s: %d %s: %v", path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// decision is the part of a /v1/decide answer these tests read.
type decision struct {
	Allowed     bool   `json:"allowed"`
	RetryAfter  string `json:"retry_after"`
	Permit      string `json:"permit"`
	Reservation string `json:"reservation"`
	Limits      []struct {
		Name     string `json:"name"`
		Kind     string `json:"kind"`
		InFlight string `json:"in_flight"`
		Burst    string `json:"burst"`
	} `json:"limits"`
	Fallback *struct {
		Mode string `json:"mode"`
	} `json:"fallback"`
}

// TestNode_concurrencyAndSettle_http drives both kinds through one
// embedded node's HTTP API, as a curl user would: three permits, a
// denial, release (twice), renew, a malformed permit; a reservation,
// its settlement and a second settlement.
func TestNode_concurrencyAndSettle_http(t *testing.T) {
	n, _ := startNode(t, "--policy", writePolicy(t, concurrencyPolicy))
	addr := n.httpAddr()
	acquire := `{"descriptors":{"tenant":"acme","op":"export"}}`
	var permits []string
	for i := range 3 {
		var d decision
		if code := post(t, addr, "/v1/decide", acquire, &d); code != http.StatusOK || !d.Allowed || d.Permit == "" {
			t.Fatalf("acquire %d: %d %+v", i, code, d)
		}
		if len(d.Limits) != 1 || d.Limits[0].Kind != "concurrency" || d.Limits[0].InFlight != []string{"1", "2", "3"}[i] || d.Limits[0].Burst != "3" {
			t.Fatalf("acquire %d: limit status %+v", i, d.Limits)
		}
		permits = append(permits, d.Permit)
	}
	var denied decision
	if code := post(t, addr, "/v1/decide", acquire, &denied); code != http.StatusTooManyRequests || denied.Allowed || denied.Permit != "" || denied.Fallback != nil {
		t.Fatalf("fourth acquire: %d %+v, want a normal 429 without a permit", code, denied)
	}
	var rel struct {
		Released bool `json:"released"`
	}
	if code := post(t, addr, "/v1/release", `{"permit":"`+permits[0]+`"}`, &rel); code != http.StatusOK || !rel.Released {
		t.Fatalf("release: %d %+v", code, rel)
	}
	rel.Released = true
	if code := post(t, addr, "/v1/release", `{"permit":"`+permits[0]+`"}`, &rel); code != http.StatusOK || rel.Released {
		t.Fatalf("second release: %d %+v, want released: false", code, rel)
	}
	var again decision
	if code := post(t, addr, "/v1/decide", acquire, &again); code != http.StatusOK || !again.Allowed {
		t.Fatalf("acquire after release: %d %+v", code, again)
	}
	var ren struct {
		Renewed   bool   `json:"renewed"`
		ExpiresIn string `json:"expires_in"`
	}
	if code := post(t, addr, "/v1/renew", `{"permit":"`+permits[1]+`"}`, &ren); code != http.StatusOK || !ren.Renewed || !strings.HasPrefix(ren.ExpiresIn, "29.") && ren.ExpiresIn != "30s" {
		t.Fatalf("renew: %d %+v, want renewed for the limit's 30s ttl", code, ren)
	}
	if code := post(t, addr, "/v1/release", `{"permit":"AAAA"}`, nil); code != http.StatusBadRequest {
		t.Fatalf("malformed permit: %d, want 400", code)
	}

	var res decision
	if code := post(t, addr, "/v1/decide", `{"descriptors":{"tenant":"acme","model":"m"},"cost":"100","reserve":true}`, &res); code != http.StatusOK || res.Reservation == "" {
		t.Fatalf("reserve: %d %+v", code, res)
	}
	if code := post(t, addr, "/v1/decide", `{"descriptors":{"tenant":"acme","model":"m"},"cost":"1"}`, nil); code != http.StatusTooManyRequests {
		t.Fatalf("after reserving the whole burst: %d, want 429", code)
	}
	var st struct {
		Settled  bool   `json:"settled"`
		Refunded string `json:"refunded"`
		Extra    string `json:"extra"`
	}
	if code := post(t, addr, "/v1/settle", `{"reservation":"`+res.Reservation+`","actual":"10"}`, &st); code != http.StatusOK || !st.Settled || st.Refunded != "90" {
		t.Fatalf("settle: %d %+v, want 90 refunded", code, st)
	}
	var after decision
	if code := post(t, addr, "/v1/decide", `{"descriptors":{"tenant":"acme","model":"m"},"cost":"90"}`, &after); code != http.StatusOK || !after.Allowed {
		t.Fatalf("the refunded 90 units: %d %+v", code, after)
	}
	st.Settled = true
	if code := post(t, addr, "/v1/settle", `{"reservation":"`+res.Reservation+`","actual":"10"}`, &st); code != http.StatusOK || st.Settled {
		t.Fatalf("second settle: %d %+v, want settled: false", code, st)
	}
}

// TestNode_inspectShowsPermits: /admin/inspect on a concurrency key shows
// its live permits by a short id prefix (never the whole id, which is the
// permit), cost and time left, and the free slots.
func TestNode_inspectShowsPermits(t *testing.T) {
	n, c := startNode(t, "--policy", writePolicy(t, concurrencyPolicy))
	var key string
	var permits [][]byte
	for range 2 {
		d := decide(t, c, 1, "tenant", "acme", "op", "export")
		if !d.Allowed || len(d.Permit) == 0 {
			t.Fatalf("acquire: %+v", d)
		}
		key, permits = d.Limits[0].Key, append(permits, d.Permit)
	}
	var got []admin.KeyState
	if code := getJSON(t, "http://"+n.adminAddr()+admin.InspectPath+"?key="+url.QueryEscape(key), &got); code != http.StatusOK || len(got) != 1 {
		t.Fatalf("inspect: %d %+v", code, got)
	}
	ks := got[0]
	if ks.Kind != "concurrency" || !ks.Held || ks.InFlight != 2 || ks.Burst != 3 || ks.Remaining != 1 || ks.RetryAfterUS != 0 || len(ks.Permits) != 2 {
		t.Fatalf("inspect of %s: %+v", key, ks)
	}
	for _, p := range ks.Permits {
		if len(p.ID) != 8 || p.Cost != 1 || p.ExpiresInUS <= 29_000_000 || p.ExpiresInUS > 30_000_000 {
			t.Fatalf("permit %+v: want an 8-hex-digit id, cost 1, about 30s left", p)
		}
		// The prefix is the first 4 of the id's 16 bytes: it names one of
		// the permits, and is not the id.
		found := 0
		for _, tok := range permits {
			if strings.Contains(hex.EncodeToString(tok), p.ID) {
				found++
			}
		}
		if found == 0 {
			t.Fatalf("permit %s is none of the tokens' ids", p.ID)
		}
	}
}

// TestNode_builtinExports is the README's try of the built-in policy's
// concurrency limit, through the HTTP API with default flags: two exports
// in flight per tenant, the third 429 until one is released; a reserve on
// the tenant's rate limit settles.
func TestNode_builtinExports(t *testing.T) {
	n, _ := startNode(t)
	addr := n.httpAddr()
	body := `{"descriptors":{"tenant":"demo","job":"export"}}`
	var first decision
	if code := post(t, addr, "/v1/decide", body, &first); code != http.StatusOK || first.Permit == "" {
		t.Fatalf("first export: %d %+v", code, first)
	}
	if code := post(t, addr, "/v1/decide", body, nil); code != http.StatusOK {
		t.Fatalf("second export: %d", code)
	}
	if code := post(t, addr, "/v1/decide", body, nil); code != http.StatusTooManyRequests {
		t.Fatalf("third export: %d, want 429", code)
	}
	if code := post(t, addr, "/v1/release", `{"permit":"`+first.Permit+`"}`, nil); code != http.StatusOK {
		t.Fatalf("release: %d", code)
	}
	if code := post(t, addr, "/v1/decide", body, nil); code != http.StatusOK {
		t.Fatalf("export after a release: %d", code)
	}
	var res decision
	if code := post(t, addr, "/v1/decide", `{"descriptors":{"tenant":"demo"},"cost":"40","reserve":true}`, &res); code != http.StatusOK || res.Reservation == "" {
		t.Fatalf("reserve: %d %+v", code, res)
	}
	var st struct {
		Settled bool `json:"settled"`
	}
	if code := post(t, addr, "/v1/settle", `{"reservation":"`+res.Reservation+`","actual":"5"}`, &st); code != http.StatusOK || !st.Settled {
		t.Fatalf("settle: %d %+v", code, st)
	}
}

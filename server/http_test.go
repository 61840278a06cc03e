package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
)

type httpReply struct {
	status int
	header http.Header
	body   string
}

// startHTTP serves NewHTTPHandler on an httptest server that stops with the
// test.
func startHTTP(t *testing.T, d Decider, reg prometheus.Gatherer, ready func() error) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(NewHTTPHandler(DefaultHTTPConfig(), d, reg, ready, nil))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, srv *httptest.Server, method, path, body string) httpReply {
	t.Helper()
	req, err := http.NewRequestWithContext(withTimeout(t), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpReply{res.StatusCode, res.Header, string(b)}
}

// jsonError is the "error" member of a JSON error body, or "" if the body
// is not one.
func jsonError(body string) string {
	var e struct{ Error string }
	if json.Unmarshal([]byte(body), &e) != nil {
		return ""
	}
	return e.Error
}

func TestHTTP_decide_allowed(t *testing.T) {
	srv := startHTTP(t, &fakeDecider{}, nil, nil)
	r := do(t, srv, http.MethodPost, "/v1/decide", `{"descriptors":{"user":"u1"},"cost":1}`)
	if r.status != http.StatusOK {
		t.Fatalf("status = %d, body %s", r.status, r.body)
	}
	if got, want := r.header.Get("RateLimit"), `"per-user";r=3;t=1`; got != want {
		t.Errorf("RateLimit = %q, want %q", got, want)
	}
	if got, want := r.header.Get("RateLimit-Policy"), `"per-user";q=5;w=1`; got != want {
		t.Errorf("RateLimit-Policy = %q, want %q", got, want)
	}
	if r.header.Get("Retry-After") != "" || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("header = %v", r.header)
	}
	// Proto field names, zero values included.
	top := checkEveryField(t, r.body)
	if top["policy_version"] != "v7" || top["reset_after"] != "0.400s" {
		t.Errorf("body %s lacks proto-named fields", r.body)
	}
	if top["retry_after"] != "0s" || top["too_costly"] != false || top["fallback"] != nil {
		t.Errorf("body %s: retry_after, too_costly, fallback not at their zero values", r.body)
	}
	if _, ok := top["retryAfter"]; ok {
		t.Errorf("body %s has a JSON-cased name", r.body)
	}
	var resp weirv1.DecideResponse
	if err := protojson.Unmarshal([]byte(r.body), &resp); err != nil || !resp.Allowed || len(resp.Limits) != 2 {
		t.Errorf("body decodes to %v, %v", &resp, err)
	}
}

func TestHTTP_decide_denied(t *testing.T) {
	srv := startHTTP(t, &fakeDecider{}, nil, nil)
	r := do(t, srv, http.MethodPost, "/v1/decide", `{"descriptors":{"user":"blocked"}}`)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("status = %d, want 429", r.status)
	}
	want := map[string]string{
		"Retry-After":      "2",
		"RateLimit":        `"per-user";r=0;t=2`,
		"RateLimit-Policy": `"per-user";q=5;w=1`,
	}
	for k, v := range want {
		if got := r.header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	var resp weirv1.DecideResponse
	if err := protojson.Unmarshal([]byte(r.body), &resp); err != nil || resp.RetryAfter.AsDuration() != 1500*time.Millisecond {
		t.Errorf("body %s (%v) lacks the exact retry", r.body, err)
	}
	// A denial's zero values are there, not left out: a client reads
	// body["allowed"] and body["remaining"] without checking for absence.
	top := checkEveryField(t, r.body)
	if top["allowed"] != false || top["remaining"] != "0" || top["from_lease"] != false {
		t.Errorf("denied body %s: allowed %v, remaining %v, from_lease %v; want false, \"0\", false", r.body, top["allowed"], top["remaining"], top["from_lease"])
	}
	lim := top["limits"].([]any)[0].(map[string]any)
	if lim["allowed"] != false || lim["remaining"] != "0" || lim["shadow"] != false {
		t.Errorf("denied body %s: limit %v lacks its zero values", r.body, lim)
	}
}

// checkEveryField decodes a DecideResponse body and fails unless it has
// every field of DecideResponse, and every limit every field of
// LimitStatus, under its proto name. It returns the decoded body.
func checkEveryField(t *testing.T, body string) map[string]any {
	t.Helper()
	var top map[string]any
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	hasAll := func(what string, m map[string]any, fields protoreflect.FieldDescriptors) {
		for i := range fields.Len() {
			if name := string(fields.Get(i).Name()); !hasKey(m, name) {
				t.Errorf("%s lacks %q: %s", what, name, body)
			}
		}
	}
	hasAll("response", top, (&weirv1.DecideResponse{}).ProtoReflect().Descriptor().Fields())
	limits, _ := top["limits"].([]any)
	if len(limits) == 0 {
		t.Fatalf("body %s has no limits", body)
	}
	for _, l := range limits {
		hasAll("limit", l.(map[string]any), (&weirv1.LimitStatus{}).ProtoReflect().Descriptor().Fields())
	}
	return top
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

func TestHTTP_decide_tooCostly(t *testing.T) {
	srv := startHTTP(t, &fakeDecider{}, nil, nil)
	r := do(t, srv, http.MethodPost, "/v1/decide", `{"descriptors":{"user":"u1"},"cost":"11"}`)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "" {
		t.Errorf("status = %d, Retry-After = %q; want 429 without Retry-After", r.status, r.header.Get("Retry-After"))
	}
}

func TestHTTP_decide_badRequests(t *testing.T) {
	d := &fakeDecider{}
	srv := startHTTP(t, d, nil, nil)
	tests := []struct {
		name, body string
		wantStatus int
		wantErr    string
	}{
		{"unknown field", `{"descriptors":{},"bogus":1}`, http.StatusBadRequest, "unknown field"},
		{"not json", `descriptors=1`, http.StatusBadRequest, "parsing body"},
		{"empty", ``, http.StatusBadRequest, "parsing body"},
		{"negative cost", `{"cost":-1}`, http.StatusBadRequest, "cost -1 must be at least 1"},
		{"zero cost", `{"descriptors":{"user":"u1"},"cost":0}`, http.StatusBadRequest, "cost 0 must be at least 1"},
		{"zero cost as a string", `{"descriptors":{"user":"u1"},"cost":"0"}`, http.StatusBadRequest, "cost 0 must be at least 1"},
		{"limiter refuses", `{"descriptors":{"fail":"invalid"}}`, http.StatusBadRequest, `unknown descriptor \"fail\"`},
		{"limiter down", `{"descriptors":{"fail":"down"}}`, http.StatusServiceUnavailable, "redis unavailable"},
		{"limiter deadline", `{"descriptors":{"fail":"deadline"}}`, http.StatusGatewayTimeout, "deadline exceeded"},
		{"too big", `{"descriptors":{"user":"` + strings.Repeat("x", 64<<10) + `"}}`, http.StatusRequestEntityTooLarge, "body exceeds 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, srv, http.MethodPost, "/v1/decide", tt.body)
			if r.status != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", r.status, tt.wantStatus, r.body)
			}
			if msg := jsonError(r.body); !strings.Contains(msg, strings.ReplaceAll(tt.wantErr, `\"`, `"`)) {
				t.Errorf("error = %q, want it to contain %q", msg, tt.wantErr)
			}
			if r.header.Get("RateLimit") != "" {
				t.Errorf("RateLimit set on an error: %v", r.header)
			}
		})
	}
	if n := d.callCount(); n != 3 {
		t.Errorf("decider asked %d times, want 3 (refused, down, deadline)", n)
	}
}

func TestHTTP_wrongMethod(t *testing.T) {
	srv := startHTTP(t, &fakeDecider{}, prometheus.NewRegistry(), nil)
	for _, path := range []string{"/v1/decide", "/v1/decide_batch"} {
		r := do(t, srv, http.MethodGet, path, "")
		if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != http.MethodPost || jsonError(r.body) == "" {
			t.Errorf("GET %s = %d %v %s, want 405 with Allow: POST", path, r.status, r.header, r.body)
		}
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		if r := do(t, srv, http.MethodPost, path, ""); r.status != http.StatusMethodNotAllowed {
			t.Errorf("POST %s = %d, want 405", path, r.status)
		}
	}
}

func TestHTTP_decideBatch(t *testing.T) {
	d := &fakeDecider{}
	srv := startHTTP(t, d, nil, nil)
	r := do(t, srv, http.MethodPost, "/v1/decide_batch",
		`{"requests":[{"descriptors":{"user":"u1"}},{"descriptors":{"user":"blocked"}}]}`)
	if r.status != http.StatusOK {
		t.Fatalf("status = %d, body %s", r.status, r.body)
	}
	for _, k := range []string{"RateLimit", "RateLimit-Policy", "Retry-After"} {
		if v := r.header.Get(k); v != "" {
			t.Errorf("%s = %q on a batch answer", k, v)
		}
	}
	var resp weirv1.DecideBatchResponse
	if err := protojson.Unmarshal([]byte(r.body), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Responses) != 2 || !resp.Responses[0].Allowed || resp.Responses[1].Allowed {
		t.Errorf("batch = %v, want allowed then denied", &resp)
	}
	var raw struct{ Responses []json.RawMessage }
	if err := json.Unmarshal([]byte(r.body), &raw); err != nil || len(raw.Responses) != 2 {
		t.Fatalf("batch body %s: %v", r.body, err)
	}
	if denied := checkEveryField(t, string(raw.Responses[1])); denied["allowed"] != false || denied["remaining"] != "0" {
		t.Errorf("denied batch response %s lacks its zero values", raw.Responses[1])
	}

	r = do(t, srv, http.MethodPost, "/v1/decide_batch", `{"requests":[{},{"cost":-5}]}`)
	if r.status != http.StatusBadRequest || !strings.Contains(jsonError(r.body), "requests[1]:") {
		t.Errorf("bad batch = %d %s, want 400 naming request 1", r.status, r.body)
	}
	if n := d.callCount(); n != 2 {
		t.Errorf("decided %d requests, want 2", n)
	}
}

func TestHTTP_metrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "weir_test_decisions_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	srv := startHTTP(t, &fakeDecider{}, reg, nil)
	r := do(t, srv, http.MethodGet, "/metrics", "")
	if r.status != http.StatusOK || !strings.Contains(r.body, "weir_test_decisions_total 3") {
		t.Errorf("/metrics = %d %s", r.status, r.body)
	}
	if r := do(t, startHTTP(t, &fakeDecider{}, nil, nil), http.MethodGet, "/metrics", ""); r.status != http.StatusNotFound {
		t.Errorf("/metrics without a gatherer = %d, want 404", r.status)
	}
}

func TestHTTP_healthAndReadiness(t *testing.T) {
	var mu sync.Mutex
	notReady := errors.New("policy not loaded")
	ready := func() error {
		mu.Lock()
		defer mu.Unlock()
		return notReady
	}
	srv := startHTTP(t, &fakeDecider{}, nil, ready)

	if r := do(t, srv, http.MethodGet, "/healthz", ""); r.status != http.StatusOK || r.body != "ok\n" {
		t.Errorf("/healthz = %d %q, want 200 ok", r.status, r.body)
	}
	if r := do(t, srv, http.MethodGet, "/readyz", ""); r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "policy not loaded") {
		t.Errorf("/readyz before = %d %q, want 503 with the reason", r.status, r.body)
	}
	mu.Lock()
	notReady = nil
	mu.Unlock()
	if r := do(t, srv, http.MethodGet, "/readyz", ""); r.status != http.StatusOK {
		t.Errorf("/readyz after = %d %q, want 200", r.status, r.body)
	}
	if r := do(t, startHTTP(t, &fakeDecider{}, nil, nil), http.MethodGet, "/readyz", ""); r.status != http.StatusOK {
		t.Errorf("/readyz with no check = %d, want 200", r.status)
	}
}

func TestHTTPConfig_Validate(t *testing.T) {
	if err := DefaultHTTPConfig().Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
	if err := (HTTPConfig{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	if err := (HTTPConfig{MaxBodyBytes: -1}).Validate(); err == nil {
		t.Error("negative MaxBodyBytes accepted")
	}
}

func TestHTTP_customBodyCap(t *testing.T) {
	srv := httptest.NewServer(NewHTTPHandler(HTTPConfig{MaxBodyBytes: 16}, &fakeDecider{}, nil, nil, nil))
	t.Cleanup(srv.Close)
	if r := do(t, srv, http.MethodPost, "/v1/decide", `{"descriptors":{"user":"u1"}}`); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("status = %d, want 413", r.status)
	}
}

func TestHTTP_decide_absentCostIsOne(t *testing.T) {
	d := &fakeDecider{}
	srv := startHTTP(t, d, nil, nil)
	if r := do(t, srv, http.MethodPost, "/v1/decide", `{"descriptors":{"user":"u1"}}`); r.status != http.StatusOK {
		t.Fatalf("status = %d (%s)", r.status, r.body)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.calls) != 1 || d.calls[0].Cost != 1 {
		t.Fatalf("decider saw %+v, want one request of cost 1", d.calls)
	}
}

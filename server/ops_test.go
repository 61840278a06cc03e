package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	decidepkg "github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/ticket"
)

// opsPolicy: jobs is a concurrency limit (made one by hand until policy
// has kind: concurrency): 2/m burst 2 reads as 2 in flight, ttl 30 s.
const opsPolicy = `
version: ops
limits:
  - {name: jobs, match: [tenant, job], group: tenant, rate: 2/m, burst: 2}
  - {name: tokens, match: [tenant], rate: 100/s, burst: 50}
`

const opsNow = int64(1_700_000_000_000_000_000)

// permitStore is a naive owner: per concurrency key a count of live
// permits (they never expire here), per token id the keys it holds, and
// reservations by id. Group "down" is unreachable.
type permitStore struct {
	mu       sync.Mutex
	inFlight map[string]int64
	permits  map[[16]byte][]string
	reserved map[[16]byte]bool
	next     byte
}

func newPermitStore() *permitStore {
	return &permitStore{inFlight: map[string]int64{}, permits: map[[16]byte][]string{}, reserved: map[[16]byte]bool{}}
}

func (s *permitStore) Decide(_ context.Context, r *decidepkg.Request, out []gcra.Result) (gcra.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Group == "down" {
		return gcra.Result{}, &limiter.UnavailableError{Reason: "owner_unreachable", Err: errors.New("no route")}
	}
	if r.Op != nil {
		return gcra.Result{}, s.op(r)
	}
	agg := gcra.Result{Allowed: true, Remaining: 50}
	var conc, rate []string
	for i, k := range r.Keys {
		out[i] = gcra.Result{Allowed: true, Remaining: 50}
		if !r.Def(i).Concurrency {
			rate = append(rate, k)
			continue
		}
		conc = append(conc, k)
		if max, ttl := decidepkg.PermitLimit(r.Limits[i]); s.inFlight[k]+r.Cost > max {
			out[i] = gcra.Result{RetryAfter: ttl - 1e9, ResetAfter: ttl}
			agg = out[i]
		} else {
			out[i].Remaining = max - s.inFlight[k] - r.Cost
		}
	}
	if !agg.Allowed {
		return agg, nil
	}
	s.next++
	id := [16]byte{s.next, 1}
	if r.Grant != nil {
		r.Grant.InFlight = make([]int64, len(r.Keys))
	}
	for i, k := range r.Keys {
		if r.Def(i).Concurrency {
			s.inFlight[k] += r.Cost
			r.Grant.InFlight[i] = s.inFlight[k]
		}
	}
	if len(conc) > 0 {
		s.permits[id] = conc
		r.Grant.Permit, _ = ticket.Encode(ticket.Ticket{Kind: ticket.Permit, Group: r.Group, Keys: conc, ID: id})
	}
	if r.Reserve {
		s.reserved[id] = true
		r.Grant.Reservation, _ = ticket.Encode(ticket.Ticket{Kind: ticket.Reservation, Group: r.Group, Keys: rate, ID: id})
	}
	return agg, nil
}

func (s *permitStore) op(r *decidepkg.Request) error {
	if r.Cost != 0 || r.Grant == nil {
		return fmt.Errorf("op with cost %d, grant %v", r.Cost, r.Grant)
	}
	switch r.Op.Kind {
	case decidepkg.OpRelease:
		keys, ok := s.permits[r.Op.ID]
		for _, k := range keys {
			s.inFlight[k]--
		}
		delete(s.permits, r.Op.ID)
		r.Grant.Done = ok
	case decidepkg.OpRenew:
		_, r.Grant.Done = s.permits[r.Op.ID]
		_, ttl := decidepkg.PermitLimit(r.Limits[0])
		r.Grant.Expiry = r.Now + cmpOr(r.Op.TTL, ttl)
	case decidepkg.OpSettle:
		r.Grant.Done = s.reserved[r.Op.ID]
		delete(s.reserved, r.Op.ID)
		r.Grant.Settlement = gcra.Settlement{Refunded: 4 - min(4, r.Op.Actual)}
	}
	return nil
}

func cmpOr(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}

func newOpsLimiter(t testing.TB) *limiter.Limiter {
	t.Helper()
	p, err := policy.Parse("ops.yaml", []byte(opsPolicy))
	if err != nil {
		t.Fatal(err)
	}
	p.Limit("jobs").Def().Concurrency = true
	lim, err := limiter.New(limiter.DefaultConfig(), policy.Static(p), newPermitStore(), nil, nil,
		limiter.WithClock(func() time.Time { return time.Unix(0, opsNow) }))
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// opsToken is a token of kind for the keys of limits in group, as the
// policy builds them.
func opsToken(t *testing.T, kind ticket.Kind, group string, limits ...string) []byte {
	t.Helper()
	var keys []string
	for _, l := range limits {
		keys = append(keys, "weir:{"+group+"}:"+l+":"+group)
	}
	if kind == ticket.Permit {
		keys[0] += ":x" // jobs' key has the job too
	}
	b, err := ticket.Encode(ticket.Ticket{Kind: kind, Group: group, Keys: keys, ID: [16]byte{9}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGRPC_permitLifecycle(t *testing.T) {
	conn := newClient(t, startGatedGRPC(t, newOpsLimiter(t), nil))
	ctx := withTimeout(t)
	req := &weirv1.DecideRequest{Descriptors: map[string]string{"tenant": "acme", "job": "x"}, Reserve: true}
	d, err := conn.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !d.GetAllowed() || len(d.GetPermit()) == 0 || len(d.GetReservation()) == 0 {
		t.Fatalf("decision %v: want admitted with a permit and a reservation", d)
	}
	kinds := map[string]*weirv1.LimitStatus{}
	for _, l := range d.GetLimits() {
		kinds[l.GetKind()] = l
	}
	if j := kinds["concurrency"]; j.GetName() != "jobs" || j.GetInFlight() != 1 || j.GetBurst() != 2 || j.GetWindow().AsDuration() != 30*time.Second || j.GetRemaining() != 1 {
		t.Errorf("concurrency status %v", j)
	}
	if r := kinds["rate"]; r.GetName() != "tokens" || r.GetInFlight() != 0 {
		t.Errorf("rate status %v", r)
	}
	rn, err := conn.Renew(ctx, &weirv1.RenewRequest{Permit: d.GetPermit(), Ttl: durationpb.New(10 * time.Second)})
	if err != nil || !rn.GetRenewed() || rn.GetExpiresIn().AsDuration() != 10*time.Second {
		t.Errorf("Renew = %v, %v; want renewed for 10s", rn, err)
	}
	st, err := conn.Settle(ctx, &weirv1.SettleRequest{Reservation: d.GetReservation(), Actual: 1})
	if err != nil || !st.GetSettled() || st.GetRefunded() != 3 {
		t.Errorf("Settle = %v, %v; want settled, 3 refunded", st, err)
	}
	st, err = conn.Settle(ctx, &weirv1.SettleRequest{Reservation: d.GetReservation(), Actual: 1})
	if err != nil || st.GetSettled() {
		t.Errorf("second Settle = %v, %v; want not settled", st, err)
	}
	for i, want := range []bool{true, false} {
		rel, err := conn.Release(ctx, &weirv1.ReleaseRequest{Permit: d.GetPermit()})
		if err != nil || rel.GetReleased() != want {
			t.Errorf("Release %d = %v, %v; want released %v", i, rel, err, want)
		}
	}
	rn, err = conn.Renew(ctx, &weirv1.RenewRequest{Permit: d.GetPermit()})
	if err != nil || rn.GetRenewed() || rn.GetExpiresIn() != nil {
		t.Errorf("Renew after release = %v, %v; want not renewed", rn, err)
	}
}

func TestGRPC_ops_errors(t *testing.T) {
	conn := newClient(t, startGatedGRPC(t, newOpsLimiter(t), nil))
	ctx := withTimeout(t)
	permit := opsToken(t, ticket.Permit, "acme", "jobs")
	tests := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"malformed permit", func() error { _, err := conn.Release(ctx, &weirv1.ReleaseRequest{Permit: []byte("junk")}); return err }, codes.InvalidArgument},
		{"empty permit", func() error { _, err := conn.Renew(ctx, &weirv1.RenewRequest{}); return err }, codes.InvalidArgument},
		{"permit settled", func() error {
			_, err := conn.Settle(ctx, &weirv1.SettleRequest{Reservation: permit})
			return err
		}, codes.InvalidArgument},
		{"negative actual", func() error {
			_, err := conn.Settle(ctx, &weirv1.SettleRequest{Reservation: opsToken(t, ticket.Reservation, "acme", "tokens"), Actual: -1})
			return err
		}, codes.InvalidArgument},
		{"negative ttl", func() error {
			_, err := conn.Renew(ctx, &weirv1.RenewRequest{Permit: permit, Ttl: durationpb.New(-time.Second)})
			return err
		}, codes.InvalidArgument},
		{"invalid ttl", func() error {
			_, err := conn.Renew(ctx, &weirv1.RenewRequest{Permit: permit, Ttl: &durationpb.Duration{Seconds: 1, Nanos: -1}})
			return err
		}, codes.InvalidArgument},
		{"unknown field", func() error {
			_, err := conn.Release(ctx, withUnknownField(t, &weirv1.ReleaseRequest{Permit: permit}))
			return err
		}, codes.InvalidArgument},
		{"token over ticket.MaxBytes", func() error {
			_, err := conn.Release(ctx, &weirv1.ReleaseRequest{Permit: make([]byte, ticket.MaxBytes+1)})
			return err
		}, codes.InvalidArgument},
		{"message over MaxOpRequestBytes", func() error {
			_, err := conn.Release(ctx, &weirv1.ReleaseRequest{Permit: make([]byte, MaxOpRequestBytes)})
			return err
		}, codes.ResourceExhausted},
		{"owner unreachable", func() error {
			_, err := conn.Release(ctx, &weirv1.ReleaseRequest{Permit: opsToken(t, ticket.Permit, "down", "jobs")})
			return err
		}, codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); status.Code(err) != tt.want {
				t.Errorf("err %v, want %s", err, tt.want)
			}
		})
	}
}

// notOperator is a Decider without Release, Renew and Settle.
type notOperator struct{ Decider }

func TestGRPC_ops_unimplementedWithoutOperator(t *testing.T) {
	conn := newClient(t, startGatedGRPC(t, notOperator{&fakeDecider{}}, nil))
	_, err := conn.Release(withTimeout(t), &weirv1.ReleaseRequest{Permit: opsToken(t, ticket.Permit, "acme", "jobs")})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("err %v, want UNIMPLEMENTED", err)
	}
	srv := startHTTP(t, notOperator{&fakeDecider{}}, nil, nil)
	if r := do(t, srv, http.MethodPost, "/v1/settle", `{}`); r.status != http.StatusNotImplemented {
		t.Errorf("HTTP status %d, want 501", r.status)
	}
}

func TestHTTP_permitLifecycle(t *testing.T) {
	srv := startHTTP(t, newOpsLimiter(t), nil, nil)
	r := do(t, srv, http.MethodPost, "/v1/decide", `{"descriptors":{"tenant":"acme","job":"x"},"reserve":true}`)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	top := checkEveryField(t, r.body)
	var conc map[string]any
	for _, l := range top["limits"].([]any) {
		if l := l.(map[string]any); l["kind"] == "concurrency" {
			conc = l
		}
	}
	if conc == nil || conc["in_flight"] != "1" || conc["burst"] != "2" || conc["window"] != "30s" {
		t.Errorf("body %s: concurrency status %v", r.body, conc)
	}
	permit, _ := top["permit"].(string)
	reservation, _ := top["reservation"].(string)
	if _, err := base64.StdEncoding.DecodeString(permit); err != nil || permit == "" || reservation == "" {
		t.Fatalf("body %s: permit %q reservation %q", r.body, permit, reservation)
	}
	steps := []struct{ path, body, want string }{
		{"/v1/renew", `{"permit":"` + permit + `"}`, `{"renewed":true,"expires_in":"30s"}`},
		{"/v1/settle", `{"reservation":"` + reservation + `","actual":"6"}`, `{"settled":true,"refunded":"0","extra":"0","forgiven":"0"}`},
		{"/v1/settle", `{"reservation":"` + reservation + `","actual":"6"}`, `{"settled":false,"refunded":"0","extra":"0","forgiven":"0"}`},
		{"/v1/release", `{"permit":"` + permit + `"}`, `{"released":true}`},
		{"/v1/release", `{"permit":"` + permit + `"}`, `{"released":false}`},
		{"/v1/renew", `{"permit":"` + permit + `","ttl":"5s"}`, `{"renewed":false,"expires_in":"0s"}`},
	}
	for _, s := range steps {
		r := do(t, srv, http.MethodPost, s.path, s.body)
		if r.status != http.StatusOK || compactJSON(r.body) != s.want {
			t.Errorf("%s %s = %d %s, want 200 %s", s.path, s.body, r.status, r.body, s.want)
		}
	}
}

func TestHTTP_ops_errors(t *testing.T) {
	srv := startHTTP(t, newOpsLimiter(t), nil, nil)
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	tests := []struct {
		path, body string
		want       int
	}{
		{"/v1/release", `{"permit":"` + b64([]byte("junk")) + `"}`, http.StatusBadRequest},
		{"/v1/release", `{}`, http.StatusBadRequest},
		{"/v1/release", `{"permit":"not base64!"}`, http.StatusBadRequest},
		{"/v1/release", `{"permit":"` + b64(opsToken(t, ticket.Permit, "acme", "jobs")) + `","more":1}`, http.StatusBadRequest},
		{"/v1/settle", `{"reservation":"` + b64(opsToken(t, ticket.Permit, "acme", "jobs")) + `"}`, http.StatusBadRequest},
		{"/v1/settle", `{"reservation":"` + b64(opsToken(t, ticket.Reservation, "acme", "tokens")) + `","actual":"-1"}`, http.StatusBadRequest},
		{"/v1/renew", `{"permit":"` + b64(opsToken(t, ticket.Permit, "acme", "jobs")) + `","ttl":"31s"}`, http.StatusBadRequest},
		{"/v1/renew", `{"permit":"` + b64(opsToken(t, ticket.Permit, "down", "jobs")) + `"}`, http.StatusServiceUnavailable},
		{"/v1/release", `{"permit":"` + strings.Repeat("A", MaxOpBodyBytes) + `"}`, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		r := do(t, srv, http.MethodPost, tt.path, tt.body)
		if r.status != tt.want || jsonError(r.body) == "" {
			t.Errorf("%s %.80s = %d %s, want %d with an error", tt.path, tt.body, r.status, r.body, tt.want)
		}
	}
	if r := do(t, srv, http.MethodGet, "/v1/renew", ""); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/renew = %d, want 405", r.status)
	}
}

// TestHTTP_ops_largestTokenFitsTheBody: a token as large as a token can be
// (ticket.MaxBytes), in base64 as JSON carries it, is read and answered on
// every op endpoint, above the default body cap of decisions.
func TestHTTP_ops_largestTokenFitsTheBody(t *testing.T) {
	srv := startHTTP(t, newOpsLimiter(t), nil, nil)
	for _, kind := range []ticket.Kind{ticket.Permit, ticket.Reservation} {
		limit := map[ticket.Kind]string{ticket.Permit: "jobs", ticket.Reservation: "tokens"}[kind]
		var keys []string
		for size := 64; len(keys) < ticket.MaxKeys && size < ticket.MaxBytes-ticket.MaxKeyBytes; {
			k := "weir:{acme}:" + limit + ":acme:" + strings.Repeat("j", ticket.MaxKeyBytes-64)
			keys = append(keys, k)
			size += len(k) + 3
		}
		tok, err := ticket.Encode(ticket.Ticket{Kind: kind, Group: "acme", Keys: keys, ID: [16]byte{9}})
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) < ticket.MaxBytes*7/8 {
			t.Fatalf("test setup: a token of %d bytes is not near the largest, %d", len(tok), ticket.MaxBytes)
		}
		b64 := base64.StdEncoding.EncodeToString(tok)
		for _, op := range []struct{ path, body string }{
			{"/v1/release", `{"permit":"` + b64 + `"}`},
			{"/v1/renew", `{"permit":"` + b64 + `"}`},
			{"/v1/settle", `{"reservation":"` + b64 + `","actual":"1"}`},
		} {
			if (op.path == "/v1/settle") != (kind == ticket.Reservation) {
				continue
			}
			if len(op.body) <= DefaultMaxBodyBytes {
				t.Fatalf("test setup: body of %d bytes fits the decisions' cap", len(op.body))
			}
			if r := do(t, srv, http.MethodPost, op.path, op.body); r.status != http.StatusOK {
				t.Errorf("%s with a %d-byte token (%d-byte body) = %d %.200s, want 200", op.path, len(tok), len(op.body), r.status, r.body)
			}
		}
	}
}

// TestHTTP_decide_concurrencyDenied: a denial by a concurrency limit is
// 429 with Retry-After, and holds no permit.
func TestHTTP_decide_concurrencyDenied(t *testing.T) {
	srv := startHTTP(t, newOpsLimiter(t), nil, nil)
	body := `{"descriptors":{"tenant":"acme","job":"x"}}`
	for range 2 {
		if r := do(t, srv, http.MethodPost, "/v1/decide", body); r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	r := do(t, srv, http.MethodPost, "/v1/decide", body)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "29" {
		t.Fatalf("third = %d Retry-After %q: %s; want 429 after 29 s", r.status, r.header.Get("Retry-After"), r.body)
	}
	var resp weirv1.DecideResponse
	if err := protojson.Unmarshal([]byte(r.body), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.GetPermit()) != 0 || resp.GetRetryAfter().AsDuration() != 29*time.Second {
		t.Errorf("denial %v: permit %q, retry %s", &resp, resp.GetPermit(), resp.GetRetryAfter().AsDuration())
	}
}

// compactJSON is body without spaces and newlines (protojson adds some
// at random; these bodies hold none of their own).
func compactJSON(body string) string {
	return strings.NewReplacer(" ", "", "\n", "").Replace(body)
}

// newClient is a weir.v1 client of the server at addr, closed with the
// test.
func newClient(t *testing.T, addr string) weirv1.RateLimiterClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return weirv1.NewRateLimiterClient(conn)
}

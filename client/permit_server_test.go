package client_test

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/ticket"
)

// permitServer is an in-process weir.v1.RateLimiter that answers as the
// issue-26 contract says an owner does, for one group ("tenant"):
//
//   - a Decide without reserve matches the concurrency limit "jobs"
//     (max in flight, ttl): admitted while a slot is free, with a permit
//     token and LimitStatus kind "concurrency", burst max, window ttl;
//     denied with retry_after until the first live permit expires. A
//     "fallback" descriptor admits without a permit, as on_failure open
//     does when the owner is unreachable.
//   - a Decide with reserve charges cost on the rate limit "tokens" (a
//     budget of units) and answers a reservation token; Settle refunds or
//     charges the difference once, then answers settled: false.
//   - Release, Renew: live permits by id; unknown ones answer false.
//     Malformed tokens are INVALID_ARGUMENT. Permits expire on clk.
//
// lose, when set, makes the owner forget every permit (a crashed owner
// without Redis): renewals and releases then answer false.
type permitServer struct {
	weirv1.UnimplementedRateLimiterServer
	clk clock.Clock
	max int
	ttl time.Duration

	mu       sync.Mutex
	budget   int64
	permits  map[[16]byte]time.Time // id -> expiry
	reserved map[[16]byte]int64
	lose     bool
	failNext int // renewals to answer UNAVAILABLE
	renews   int
	releases int
	decides  int
	settles  int
}

func newPermitServer(clk clock.Clock, maxInFlight int, ttl time.Duration, budget int64) *permitServer {
	return &permitServer{clk: clk, max: maxInFlight, ttl: ttl, budget: budget,
		permits: map[[16]byte]time.Time{}, reserved: map[[16]byte]int64{}}
}

func (s *permitServer) Decide(_ context.Context, r *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decides++
	tenant := r.GetDescriptors()["tenant"]
	if tenant == "" {
		return nil, status.Error(codes.InvalidArgument, "no tenant")
	}
	if r.GetReserve() {
		return s.reserveLocked(tenant, r.GetCost()), nil
	}
	if r.GetDescriptors()["junk"] != "" { // a permit no node can read
		return &weirv1.DecideResponse{Allowed: true, Matched: true, Permit: []byte("junk"), Limits: []*weirv1.LimitStatus{
			{Name: "jobs", Kind: "concurrency", Allowed: true, Burst: int64(s.max), Window: durationpb.New(s.ttl)}}}, nil
	}
	if r.GetDescriptors()["fallback"] != "" {
		return &weirv1.DecideResponse{Allowed: true, Matched: true,
			Fallback: &weirv1.Fallback{Mode: "open", Reason: "owner_unreachable"}}, nil
	}
	now := s.clk.Now()
	var first time.Time
	for id, exp := range s.permits {
		if !exp.After(now) {
			delete(s.permits, id)
		} else if first.IsZero() || exp.Before(first) {
			first = exp
		}
	}
	l := &weirv1.LimitStatus{Name: "jobs", Key: "weir:{" + tenant + "}:jobs:" + tenant, Kind: "concurrency",
		Burst: int64(s.max), Window: durationpb.New(s.ttl)}
	resp := &weirv1.DecideResponse{Matched: true, Limits: []*weirv1.LimitStatus{l}}
	if len(s.permits) >= s.max {
		l.RetryAfter = durationpb.New(first.Sub(now))
		l.InFlight = int64(len(s.permits))
		resp.RetryAfter = l.RetryAfter
		return resp, nil
	}
	id := newID()
	s.permits[id] = now.Add(s.ttl)
	tok, err := ticket.Encode(ticket.Ticket{Kind: ticket.Permit, Group: tenant, Keys: []string{l.Key}, ID: id})
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	l.Allowed, l.InFlight, l.Remaining = true, int64(len(s.permits)), int64(s.max-len(s.permits))
	resp.Allowed, resp.Remaining, resp.Permit = true, l.Remaining, tok
	return resp, nil
}

func (s *permitServer) reserveLocked(tenant string, cost int64) *weirv1.DecideResponse {
	l := &weirv1.LimitStatus{Name: "tokens", Key: "weir:{" + tenant + "}:tokens:" + tenant, Kind: "rate"}
	resp := &weirv1.DecideResponse{Matched: true, Limits: []*weirv1.LimitStatus{l}}
	if cost > s.budget {
		resp.RetryAfter = durationpb.New(time.Second)
		return resp
	}
	s.budget -= cost
	id := newID()
	s.reserved[id] = cost
	tok, _ := ticket.Encode(ticket.Ticket{Kind: ticket.Reservation, Group: tenant, Keys: []string{l.Key}, ID: id})
	l.Allowed, l.Remaining = true, s.budget
	resp.Allowed, resp.Remaining, resp.Reservation = true, s.budget, tok
	return resp
}

func (s *permitServer) Release(_ context.Context, r *weirv1.ReleaseRequest) (*weirv1.ReleaseResponse, error) {
	id, err := tokenID(r.GetPermit(), ticket.Permit)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releases++
	_, held := s.livePermitLocked(id)
	delete(s.permits, id)
	return &weirv1.ReleaseResponse{Released: held}, nil
}

func (s *permitServer) Renew(_ context.Context, r *weirv1.RenewRequest) (*weirv1.RenewResponse, error) {
	id, err := tokenID(r.GetPermit(), ticket.Permit)
	if err != nil {
		s.mu.Lock()
		s.renews++
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renews++
	if s.failNext > 0 {
		s.failNext--
		return nil, status.Error(codes.Unavailable, "owner unreachable")
	}
	now, held := s.livePermitLocked(id)
	if !held {
		return &weirv1.RenewResponse{}, nil
	}
	ttl := s.ttl
	if d := r.GetTtl().AsDuration(); d > 0 && d < ttl {
		ttl = d
	}
	s.permits[id] = now.Add(ttl)
	return &weirv1.RenewResponse{Renewed: true, ExpiresIn: durationpb.New(ttl)}, nil
}

func (s *permitServer) Settle(_ context.Context, r *weirv1.SettleRequest) (*weirv1.SettleResponse, error) {
	id, err := tokenID(r.GetReservation(), ticket.Reservation)
	if err != nil {
		return nil, err
	}
	if r.GetActual() < 0 {
		return nil, status.Error(codes.InvalidArgument, "negative actual")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settles++
	reserved, ok := s.reserved[id]
	if !ok {
		return &weirv1.SettleResponse{}, nil
	}
	delete(s.reserved, id)
	s.budget += reserved - r.GetActual()
	return &weirv1.SettleResponse{Settled: true, Refunded: max(reserved-r.GetActual(), 0), Extra: max(r.GetActual()-reserved, 0)}, nil
}

// livePermitLocked reports whether permit id is held and not expired.
func (s *permitServer) livePermitLocked(id [16]byte) (time.Time, bool) {
	now := s.clk.Now()
	if s.lose {
		clear(s.permits)
	}
	exp, ok := s.permits[id]
	return now, ok && exp.After(now)
}

type permitCounts struct{ decides, renews, releases, settles, live int }

func (s *permitServer) counts() permitCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := 0
	for _, exp := range s.permits {
		if exp.After(s.clk.Now()) {
			live++
		}
	}
	return permitCounts{s.decides, s.renews, s.releases, s.settles, live}
}

func (s *permitServer) loseAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose = true
}

func tokenID(tok []byte, kind ticket.Kind) ([16]byte, error) {
	t, err := ticket.Decode(tok)
	if err != nil || t.Kind != kind {
		return [16]byte{}, status.Error(codes.InvalidArgument, "malformed token")
	}
	return t.ID, nil
}

func newID() [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return id
}

package server

import (
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/limiter"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestFromProto(t *testing.T) {
	tests := []struct {
		in   *weirv1.DecideRequest
		want int64
	}{
		{&weirv1.DecideRequest{Descriptors: map[string]string{"tenant": "acme"}, Cost: new(int64(3))}, 3},
		{&weirv1.DecideRequest{Descriptors: map[string]string{"tenant": "acme"}}, 1}, // absent: the API's default
		{&weirv1.DecideRequest{Cost: new(int64(0))}, 0},                              // explicit 0: passed on for the limiter to refuse
		{&weirv1.DecideRequest{Cost: new(int64(-2))}, -2},                            // passed on for the limiter to refuse
		{nil, 1},
	}
	for i, tt := range tests {
		got := FromProto(tt.in)
		if got.Cost != tt.want {
			t.Errorf("case %d: cost = %d, want %d", i, got.Cost, tt.want)
		}
		if len(got.Descriptors) != len(tt.in.GetDescriptors()) || got.Descriptors["tenant"] != tt.in.GetDescriptors()["tenant"] {
			t.Errorf("case %d: descriptors = %v, want %v", i, got.Descriptors, tt.in.GetDescriptors())
		}
	}
}

func TestFromProto_reserve(t *testing.T) {
	if !FromProto(&weirv1.DecideRequest{Reserve: true}).Reserve || FromProto(&weirv1.DecideRequest{}).Reserve {
		t.Error("reserve not passed on as it is")
	}
}

func TestToProto_concurrencyFields(t *testing.T) {
	d := limiter.Decision{Allowed: true, Matched: true, Permit: []byte("p"), Reservation: []byte("r"),
		Limits: []limiter.LimitDecision{{Name: "jobs", Burst: 2, Window: 30 * time.Second, InFlight: 1, Kind: limiter.KindConcurrency, Remaining: 1}}}
	out := ToProto(d)
	l := out.GetLimits()[0]
	if string(out.GetPermit()) != "p" || string(out.GetReservation()) != "r" || l.GetInFlight() != 1 || l.GetKind() != "concurrency" ||
		l.GetBurst() != 2 || l.GetWindow().AsDuration() != 30*time.Second || l.GetRemaining() != 1 {
		t.Errorf("ToProto = %v", out)
	}
}

func TestToProto_full(t *testing.T) {
	d := limiter.Decision{
		Allowed: false, Matched: true, RetryAfter: 150 * time.Millisecond,
		Remaining: 0, ResetAfter: 2 * time.Second, PolicyVersion: "v3", FromLease: true,
		Fallback: &limiter.Fallback{Mode: "local", Reason: "owner_unreachable"},
		Limits: []limiter.LimitDecision{{
			Name: "per-user", Key: "weir:{acme}:per-user:u7", Shadow: false, Allowed: false,
			TooCostly: false, Remaining: 0, RetryAfter: 150 * time.Millisecond,
			ResetAfter: 2 * time.Second, Burst: 20, Window: 2 * time.Second,
		}},
	}
	want := &weirv1.DecideResponse{
		Allowed: false, Matched: true, RetryAfter: durationpb.New(150 * time.Millisecond),
		ResetAfter: durationpb.New(2 * time.Second), PolicyVersion: "v3", FromLease: true,
		Fallback: &weirv1.Fallback{Mode: "local", Reason: "owner_unreachable"},
		Limits: []*weirv1.LimitStatus{{
			Name: "per-user", Key: "weir:{acme}:per-user:u7",
			RetryAfter: durationpb.New(150 * time.Millisecond), ResetAfter: durationpb.New(2 * time.Second),
			Burst: 20, Window: durationpb.New(2 * time.Second),
		}},
	}
	if got := ToProto(d); !proto.Equal(got, want) {
		t.Errorf("ToProto =\n%v\nwant\n%v", got, want)
	}
}

func TestToProto_zeroDurationsUnset(t *testing.T) {
	got := ToProto(limiter.Decision{Allowed: true, Matched: true, Limits: []limiter.LimitDecision{{Name: "a", Allowed: true, TooCostly: false}}})
	if got.RetryAfter != nil || got.ResetAfter != nil || got.Limits[0].RetryAfter != nil || got.Fallback != nil {
		t.Errorf("zero fields set: %v", got)
	}
	if empty := ToProto(limiter.Decision{Allowed: true}); empty.Limits != nil {
		t.Errorf("limits = %v, want nil for an unmatched decision", empty.Limits)
	}
}

func TestToProto_tooCostly(t *testing.T) {
	got := ToProto(limiter.Decision{Matched: true, TooCostly: true, Limits: []limiter.LimitDecision{{Name: "a", TooCostly: true, Burst: 5}}})
	if !got.TooCostly || !got.Limits[0].TooCostly || got.Allowed || got.RetryAfter.AsDuration() != 0 {
		t.Errorf("ToProto = %v, want a too_costly denial with no retry", got)
	}
}

// A too-costly composite whose other limit is busy: the response says
// too_costly with no retry_after, and the busy limit's status keeps its own.
func TestToProto_tooCostlyWithABusyLimit(t *testing.T) {
	got := ToProto(limiter.Decision{Matched: true, TooCostly: true, Limits: []limiter.LimitDecision{
		{Name: "user", TooCostly: true, Burst: 3},
		{Name: "tenant", RetryAfter: 40 * time.Millisecond, Burst: 50},
	}})
	if !got.TooCostly || got.RetryAfter != nil || !got.Limits[0].TooCostly || got.Limits[1].RetryAfter.AsDuration() != 40*time.Millisecond {
		t.Errorf("ToProto = %v, want too_costly, no retry_after, the tenant's 40ms kept", got)
	}
}

// naiveToProto is the conversion written the plain way, one allocation
// per message: the reference ToProto and ToProtoBatch must equal.
func naiveToProto(d limiter.Decision) *weirv1.DecideResponse {
	dur := func(d time.Duration) *durationpb.Duration {
		if d == 0 {
			return nil
		}
		return durationpb.New(d)
	}
	out := &weirv1.DecideResponse{
		Allowed: d.Allowed, RetryAfter: dur(d.RetryAfter), Remaining: d.Remaining,
		ResetAfter: dur(d.ResetAfter), Matched: d.Matched, TooCostly: d.TooCostly,
		PolicyVersion: d.PolicyVersion,
	}
	for _, l := range d.Limits {
		out.Limits = append(out.Limits, &weirv1.LimitStatus{
			Name: l.Name, Key: l.Key, Allowed: l.Allowed, Remaining: l.Remaining,
			RetryAfter: dur(l.RetryAfter), Shadow: l.Shadow, Burst: l.Burst,
			Window: dur(l.Window), ResetAfter: dur(l.ResetAfter), TooCostly: l.TooCostly,
		})
	}
	if d.Fallback != nil {
		out.Fallback = &weirv1.Fallback{Mode: d.Fallback.Mode, Reason: d.Fallback.Reason}
	}
	return out
}

func convertCases() []limiter.Decision {
	two := []limiter.LimitDecision{
		{Name: "user", Key: "weir:{t}:user:t:u", Allowed: true, Remaining: 2, ResetAfter: 200 * time.Millisecond, Burst: 3, Window: 600 * time.Millisecond},
		{Name: "tenant", Key: "weir:{t}:tenant:t", Shadow: true, RetryAfter: -time.Nanosecond, ResetAfter: 90*time.Second + 7, Burst: 50, Window: time.Hour},
	}
	return []limiter.Decision{
		{Allowed: true, PolicyVersion: "v1"}, // unmatched: no limits, no durations
		{Allowed: true, Matched: true, Remaining: 2, ResetAfter: 90*time.Second + 7, Limits: two},
		{Matched: true, RetryAfter: 1500 * time.Millisecond, Limits: two[:1], Fallback: &limiter.Fallback{Mode: "closed", Reason: "owner_unreachable"}},
		{Matched: true, TooCostly: true, Limits: []limiter.LimitDecision{{Name: "a", TooCostly: true}}},
	}
}

func TestToProto_matchesNaive(t *testing.T) {
	for i, d := range convertCases() {
		if got, want := ToProto(d), naiveToProto(d); !proto.Equal(got, want) {
			t.Errorf("case %d: ToProto =\n%v\nwant\n%v", i, got, want)
		}
	}
}

func TestToProtoBatch_matchesNaive(t *testing.T) {
	decs := convertCases()
	decs = append(decs, decs...)
	got := ToProtoBatch(decs)
	if len(got) != len(decs) {
		t.Fatalf("%d responses for %d decisions", len(got), len(decs))
	}
	for i, d := range decs {
		if want := naiveToProto(d); !proto.Equal(got[i], want) {
			t.Errorf("response %d =\n%v\nwant\n%v", i, got[i], want)
		}
	}
	// Each response's limits are its own: appending to one must not
	// overwrite the next one's.
	got[1].Limits = append(got[1].Limits, &weirv1.LimitStatus{Name: "extra"})
	if !proto.Equal(got[2], naiveToProto(decs[2])) {
		t.Errorf("appending to response 1's limits changed response 2: %v", got[2])
	}
	if empty := ToProtoBatch(nil); len(empty) != 0 {
		t.Errorf("ToProtoBatch(nil) = %v, want empty", empty)
	}
}

// A decision of up to two limits costs one allocation, of more limits four
// (the response, its limit statuses, their pointers, its durations); a
// batch costs five, however many decisions.
func TestToProto_allocations(t *testing.T) {
	d := convertCases()[1]
	if n := testing.AllocsPerRun(100, func() { ToProto(d) }); n > 1 {
		t.Errorf("ToProto of two limits allocates %v times, want 1", n)
	}
	three := d
	three.Limits = append(append([]limiter.LimitDecision(nil), d.Limits...), d.Limits[0])
	if n := testing.AllocsPerRun(100, func() { ToProto(three) }); n > 4 {
		t.Errorf("ToProto of three limits allocates %v times, want at most 4", n)
	}
	if got, want := ToProto(three), naiveToProto(three); !proto.Equal(got, want) {
		t.Errorf("ToProto of three limits =\n%v\nwant\n%v", got, want)
	}
	decs := make([]limiter.Decision, 100)
	for i := range decs {
		decs[i] = d
	}
	if n := testing.AllocsPerRun(20, func() { ToProtoBatch(decs) }); n > 5 {
		t.Errorf("ToProtoBatch of 100 allocates %v times, want at most 5", n)
	}
}

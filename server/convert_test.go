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

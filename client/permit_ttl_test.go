package client

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

func TestPermitTTL_smallestConcurrencyWindow(t *testing.T) {
	lim := func(kind string, w time.Duration) *weirv1.LimitStatus {
		return &weirv1.LimitStatus{Kind: kind, Window: durationpb.New(w)}
	}
	for _, tc := range []struct {
		name   string
		limits []*weirv1.LimitStatus
		want   time.Duration
	}{
		{"none", nil, 0},
		{"rate windows do not count", []*weirv1.LimitStatus{lim("rate", time.Second), lim("", time.Second)}, 0},
		{"one", []*weirv1.LimitStatus{lim("rate", time.Second), lim("concurrency", 30*time.Second)}, 30 * time.Second},
		{"the smallest", []*weirv1.LimitStatus{lim("concurrency", time.Minute), lim("concurrency", 9*time.Second)}, 9 * time.Second},
		{"zero windows are unknown", []*weirv1.LimitStatus{lim("concurrency", 0), lim("concurrency", time.Minute)}, time.Minute},
	} {
		if got := permitTTL(&weirv1.DecideResponse{Limits: tc.limits}); got != tc.want {
			t.Errorf("%s: permitTTL = %v, want %v", tc.name, got, tc.want)
		}
	}
}

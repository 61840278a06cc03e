package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/server/servertest"
)

func TestFormatDecision(t *testing.T) {
	denied := fakeResponse(false)
	denied.Fallback = &weirv1.Fallback{Mode: "local", Reason: "redis_unavailable"}
	denied.Limits = append(denied.Limits, &weirv1.LimitStatus{
		Name: "audit", Key: "weir:{acme}:audit:acme", Allowed: false, Shadow: true,
		Burst: 5, Window: durationpb.New(time.Minute), RetryAfter: durationpb.New(12 * time.Second),
	})
	tests := []struct {
		name string
		resp *weirv1.DecideResponse
		want string
	}{
		{"allowed", fakeResponse(true), `ALLOWED
remaining:    4
reset after:  600ms
policy:       v7
limits:
  NAME      VERDICT  REMAINING  RETRY AFTER  RESET AFTER  QUOTA      KEY
  per-user  allowed  4          0s           600ms        10 per 1s  weir:{acme}:per-user:acme:u7
`},
		{"denied with fallback and shadow", denied, `DENIED: retry after 250ms
remaining:    0
reset after:  600ms
policy:       v7
fallback:     local (redis_unavailable)
limits:
  NAME      VERDICT          REMAINING  RETRY AFTER  RESET AFTER  QUOTA       KEY
  per-user  denied           0          250ms        600ms        10 per 1s   weir:{acme}:per-user:acme:u7
  audit     denied (shadow)  0          12s          0s           5 per 1m0s  weir:{acme}:audit:acme
`},
		{"too costly", &weirv1.DecideResponse{TooCostly: true, Matched: true, PolicyVersion: "v7"}, `DENIED: the cost exceeds a limit's burst, the request can never pass
remaining:    0
reset after:  0s
policy:       v7
`},
		{"unmatched", &weirv1.DecideResponse{Allowed: true, PolicyVersion: "v7"}, `ALLOWED: no limit matched
policy:       v7
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatDecision(tt.resp); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestRunDecide_exitCodes(t *testing.T) {
	addr := servertest.Serve(t, &fakeNode{})
	tests := []struct {
		user     string
		wantCode int
		want     string // in stdout, or in stderr on error
	}{
		{"key-2", exitOK, "ALLOWED\n"},
		{"key-3", exitNo, "DENIED: retry after 250ms\n"},
		{"key-1", exitError, "code = Unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.user, func(t *testing.T) {
			code, stdout, stderr := runCLI(t.Context(), "decide", "--addr", addr, "-d", "tenant=acme", "-d", "user="+tt.user)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			if !strings.HasPrefix(stdout, tt.want) && !strings.Contains(stderr, tt.want) {
				t.Errorf("stdout %q / stderr %q lack %q", stdout, stderr, tt.want)
			}
		})
	}
}

func TestRunDecide_json(t *testing.T) {
	addr := servertest.Serve(t, &fakeNode{})
	code, stdout, stderr := runCLI(t.Context(), "decide", "--addr", addr, "-d", "user=key-3", "--cost", "2", "--json")
	if code != exitNo {
		t.Fatalf("exit %d, want 1 (stderr %q)", code, stderr)
	}
	var got weirv1.DecideResponse
	if err := protojson.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("output is not protojson: %v\n%s", err, stdout)
	}
	if !proto.Equal(&got, fakeResponse(false)) {
		t.Errorf("decoded %v, want %v", &got, fakeResponse(false))
	}
}

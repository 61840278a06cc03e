package httplimit

import (
	"net/http"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// deniedResponse is a composite decision: a tenant limit that allows, a
// per-user limit that denies, and a shadow limit that would deny.
func deniedResponse() *weirv1.DecideResponse {
	return &weirv1.DecideResponse{
		Allowed:    false,
		Matched:    true,
		RetryAfter: dur(200 * time.Millisecond),
		ResetAfter: dur(1200 * time.Millisecond),
		Limits: []*weirv1.LimitStatus{
			{Name: "per-tenant", Allowed: true, Remaining: 180, Burst: 200, Window: dur(200 * time.Millisecond), ResetAfter: dur(20 * time.Millisecond)},
			{Name: "per-user", Remaining: 0, Burst: 20, Window: dur(time.Second), ResetAfter: dur(1200 * time.Millisecond), RetryAfter: dur(200 * time.Millisecond)},
			{Name: "new-cap", Shadow: true, Remaining: 0, Burst: 5, Window: dur(time.Minute), ResetAfter: dur(time.Minute)},
		},
	}
}

func TestWriteHeaders_denied(t *testing.T) {
	h := http.Header{}
	WriteHeaders(h, deniedResponse())
	want := map[string]string{
		"RateLimit-Policy": `"per-tenant";q=200;w=1, "per-user";q=20;w=1`,
		// per-user denies: its t is its retry (200ms -> 1), not its reset.
		"RateLimit":   `"per-tenant";r=180;t=1, "per-user";r=0;t=1`,
		"Retry-After": "1",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if len(h) != len(want) {
		t.Errorf("header = %v, want exactly %v", h, want)
	}
}

func TestWriteHeaders_allowedHasNoRetryAfter(t *testing.T) {
	h := http.Header{}
	WriteHeaders(h, &weirv1.DecideResponse{
		Allowed: true, Matched: true, Remaining: 2,
		Limits: []*weirv1.LimitStatus{{Name: "api", Allowed: true, Remaining: 2, Burst: 3, Window: dur(600 * time.Millisecond), ResetAfter: dur(200 * time.Millisecond)}},
	})
	if got, want := h.Get("RateLimit"), `"api";r=2;t=1`; got != want {
		t.Errorf("RateLimit = %q, want %q", got, want)
	}
	if got, want := h.Get("RateLimit-Policy"), `"api";q=3;w=1`; got != want {
		t.Errorf("RateLimit-Policy = %q, want %q", got, want)
	}
	if _, ok := h["Retry-After"]; ok {
		t.Errorf("Retry-After set on an allowed response: %v", h)
	}
}

func TestWriteHeaders_rounding(t *testing.T) {
	tests := []struct {
		name                 string
		retry, reset, window time.Duration
		wantRetry, wantRL    string
		wantPolicy           string
	}{
		{"just over a second", 1000001 * time.Microsecond, 1000001 * time.Microsecond, 1000001 * time.Microsecond, "2", `"l";r=0;t=2`, `"l";q=4;w=2`},
		{"exact second", time.Second, time.Second, time.Second, "1", `"l";r=0;t=1`, `"l";q=4;w=1`},
		{"just under a second", 999999 * time.Microsecond, 999999 * time.Microsecond, 999999 * time.Microsecond, "1", `"l";r=0;t=1`, `"l";q=4;w=1`},
		{"zero waits", 0, 0, 0, "1", `"l";r=0;t=1`, `"l";q=4;w=1`},
		{"one microsecond", time.Microsecond, time.Microsecond, time.Microsecond, "1", `"l";r=0;t=1`, `"l";q=4;w=1`},
		{"an hour and a nanosecond", time.Hour + 1, time.Hour + 1, time.Hour + 1, "3601", `"l";r=0;t=3601`, `"l";q=4;w=3601`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			WriteHeaders(h, &weirv1.DecideResponse{
				Matched: true, RetryAfter: dur(tt.retry),
				Limits: []*weirv1.LimitStatus{{Name: "l", Burst: 4, Window: dur(tt.window), ResetAfter: dur(tt.reset), RetryAfter: dur(tt.retry)}},
			})
			if got := h.Get("Retry-After"); got != tt.wantRetry {
				t.Errorf("Retry-After = %q, want %q", got, tt.wantRetry)
			}
			if got := h.Get("RateLimit"); got != tt.wantRL {
				t.Errorf("RateLimit = %q, want %q", got, tt.wantRL)
			}
			if got := h.Get("RateLimit-Policy"); got != tt.wantPolicy {
				t.Errorf("RateLimit-Policy = %q, want %q", got, tt.wantPolicy)
			}
		})
	}
}

func TestWriteHeaders_tooCostlyHasNoRetryAfter(t *testing.T) {
	h := http.Header{}
	WriteHeaders(h, &weirv1.DecideResponse{
		Matched: true, TooCostly: true,
		Limits: []*weirv1.LimitStatus{{Name: "tokens", TooCostly: true, Remaining: 10, Burst: 10, Window: dur(10 * time.Second)}},
	})
	if _, ok := h["Retry-After"]; ok {
		t.Errorf("Retry-After set on a too_costly denial: %v", h)
	}
	if got, want := h.Get("RateLimit"), `"tokens";r=10;t=0`; got != want {
		t.Errorf("RateLimit = %q, want %q", got, want)
	}
	if got := StatusCode(&weirv1.DecideResponse{TooCostly: true}); got != http.StatusTooManyRequests {
		t.Errorf("StatusCode(too_costly) = %d, want 429", got)
	}
}

func TestWriteHeaders_onlyShadowLimits(t *testing.T) {
	h := http.Header{}
	WriteHeaders(h, &weirv1.DecideResponse{
		Allowed: true, Matched: true,
		Limits: []*weirv1.LimitStatus{{Name: "trial", Shadow: true, Burst: 1, Window: dur(time.Second)}},
	})
	if len(h) != 0 {
		t.Errorf("header = %v, want nothing for shadow-only limits", h)
	}
}

func TestWriteHeaders_unmatchedAndNil(t *testing.T) {
	h := http.Header{}
	WriteHeaders(h, &weirv1.DecideResponse{Allowed: true})
	WriteHeaders(h, nil)
	if len(h) != 0 {
		t.Errorf("header = %v, want nothing", h)
	}
}

func TestWriteHeaders_replacesEarlierValues(t *testing.T) {
	h := http.Header{}
	h.Add("RateLimit", `"stale";r=9;t=9`)
	WriteHeaders(h, deniedResponse())
	if got := h.Values("RateLimit"); len(got) != 1 {
		t.Errorf("RateLimit values = %q, want one", got)
	}
}

func TestSFString(t *testing.T) {
	tests := map[string]string{
		"per-user":   `"per-user"`,
		"":           `""`,
		`a"b\c`:      `"a\"b\\c"`,
		"tab\there":  `"tab?here"`,
		"café":       `"caf?"`,
		"bad\xffutf": `"bad?utf"`,
	}
	for in, want := range tests {
		if got := sfString(in); got != want {
			t.Errorf("sfString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestSFInteger_clamps(t *testing.T) {
	tests := map[int64]string{-5: "0", 0: "0", 42: "42", 1 << 62: "999999999999999"}
	for in, want := range tests {
		if got := sfInteger(in); got != want {
			t.Errorf("sfInteger(%d) = %s, want %s", in, got, want)
		}
	}
}

func TestStatusCode(t *testing.T) {
	tests := []struct {
		resp *weirv1.DecideResponse
		want int
	}{
		{&weirv1.DecideResponse{Allowed: true}, http.StatusOK},
		{&weirv1.DecideResponse{Allowed: true, Fallback: &weirv1.Fallback{Mode: "open"}}, http.StatusOK},
		{&weirv1.DecideResponse{}, http.StatusTooManyRequests},
		{&weirv1.DecideResponse{Fallback: &weirv1.Fallback{Mode: "closed"}}, http.StatusTooManyRequests},
		{nil, http.StatusTooManyRequests},
	}
	for i, tt := range tests {
		if got := StatusCode(tt.resp); got != tt.want {
			t.Errorf("case %d: StatusCode = %d, want %d", i, got, tt.want)
		}
	}
}

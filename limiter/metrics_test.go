package limiter

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/policy"
)

func TestDeniedLog_note_oncePerIntervalOnRequestStamps(t *testing.T) {
	var buf bytes.Buffer
	d := newDeniedLog(slog.New(slog.NewTextHandler(&buf, nil)), time.Second)
	const t0 = 1_700_000_000_000_000_000 // nanoseconds
	for _, at := range []int64{t0, t0 + 1, t0 + 999_999_999, t0 + 1_000_000_000, t0 + 1_000_000_001} {
		d.note(at, "k", "per-user", resultDenied)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "suppressed_since_last=0") || !strings.Contains(lines[1], "suppressed_since_last=2") {
		t.Fatalf("suppressed counts:\n%s", buf.String())
	}
	buf.Reset()
	newDeniedLog(slog.New(slog.NewTextHandler(&buf, nil)), 0).note(t0, "k", "per-user", resultDenied)
	if buf.Len() != 0 {
		t.Fatal("a zero interval still logged")
	}
}

// swapSource is a PolicySource whose policy a test replaces.
type swapSource struct{ p atomic.Pointer[policy.Policy] }

func (s *swapSource) Current() *policy.Policy { return s.p.Load() }

// The per-policy counter cache counts into the same series across a
// reload, only creates the series it counts, and sees a new policy's
// limits.
func TestLimiter_record_countsAcrossReloads(t *testing.T) {
	parse := func(yaml string) *policy.Policy {
		p, err := policy.Parse("test.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	src := &swapSource{}
	src.p.Store(parse(testPolicy))
	reg := prometheus.NewRegistry()
	lim, err := New(DefaultConfig(), src, MemoryStore(memstore.New(memstore.DefaultConfig())), nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	decide := func(kv ...string) {
		t.Helper()
		if _, err := lim.Decide(context.Background(), Request{Descriptors: desc(kv...), Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	decide("ip", "10.0.0.1")
	decide("ip", "10.0.0.1")
	src.p.Store(parse(strings.Replace(testPolicy, "version: test-1", "version: test-2", 1) + `
  - name: per-region
    match: [region]
    rate: 1/s
    burst: 1
`))
	decide("ip", "10.0.0.1")
	decide("region", "eu")
	decide("region", "eu") // denied: burst 1
	want := `
# HELP weir_decisions_total Decisions per limit and result (allowed, denied, shadow_denied, too_costly).
# TYPE weir_decisions_total counter
weir_decisions_total{limit="per-ip",result="allowed"} 3
weir_decisions_total{limit="per-region",result="allowed"} 1
weir_decisions_total{limit="per-region",result="denied"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "weir_decisions_total"); err != nil {
		t.Error(err)
	}
}

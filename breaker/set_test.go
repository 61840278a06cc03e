package breaker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTestSet(t *testing.T) (*Set, *prometheus.Registry, *bytes.Buffer) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	var logs bytes.Buffer
	s, err := NewSet(cfg(2, shortOpen, 1), slog.New(slog.NewTextHandler(&logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	return s, reg, &logs
}

func wantMetrics(t *testing.T, reg *prometheus.Registry, want string) {
	t.Helper()
	const header = `
# HELP weir_breaker_state Circuit breaker state per dependency: 0 closed, 1 half_open, 2 open.
# TYPE weir_breaker_state gauge
# HELP weir_breaker_transitions_total Circuit breaker transitions per dependency, by state entered.
# TYPE weir_breaker_transitions_total counter
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(header+want),
		"weir_breaker_state", "weir_breaker_transitions_total"); err != nil {
		t.Error(err)
	}
}

func TestNewSet_errors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		reg  func() prometheus.Registerer
	}{
		{"invalid config", Config{}, func() prometheus.Registerer { return nil }},
		{"registered twice", DefaultConfig(), func() prometheus.Registerer {
			reg := prometheus.NewRegistry()
			if _, err := NewSet(DefaultConfig(), nil, reg); err != nil {
				t.Fatal(err)
			}
			return reg
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewSet(tc.cfg, nil, tc.reg()); err == nil {
				t.Error("NewSet succeeded, want an error")
			}
		})
	}
}

func TestNewSet_nilLoggerAndRegistry(t *testing.T) {
	s, err := NewSet(cfg(1, time.Hour, 1), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	call(t, s.Get("a"), errDep)
	wantState(t, s.Get("a"), Open)
}

func TestSet_Get_samePerName(t *testing.T) {
	s, _, _ := newTestSet(t)
	a, b := s.Get("a"), s.Get("b")
	if a == b {
		t.Fatal("different names share a breaker")
	}
	if s.Get("a") != a {
		t.Fatal("Get returned a new breaker for a known name")
	}
	call(t, a, errDep)
	call(t, a, errDep)
	wantState(t, s.Get("a"), Open)
	wantState(t, b, Closed)
}

func TestSet_metrics(t *testing.T) {
	s, reg, logs := newTestSet(t)
	a := s.Get("redis-a")
	s.Get("peer-b")
	wantMetrics(t, reg, `
weir_breaker_state{name="peer-b"} 0
weir_breaker_state{name="redis-a"} 0
`)

	trip(t, a, 2)
	wantMetrics(t, reg, `
weir_breaker_state{name="peer-b"} 0
weir_breaker_state{name="redis-a"} 2
weir_breaker_transitions_total{name="redis-a",to="open"} 1
`)

	waitHalfOpen(t, a)
	done, err := a.Allow()
	if err != nil {
		t.Fatal(err)
	}
	wantMetrics(t, reg, `
weir_breaker_state{name="peer-b"} 0
weir_breaker_state{name="redis-a"} 1
weir_breaker_transitions_total{name="redis-a",to="half_open"} 1
weir_breaker_transitions_total{name="redis-a",to="open"} 1
`)

	done(nil)
	wantMetrics(t, reg, `
weir_breaker_state{name="peer-b"} 0
weir_breaker_state{name="redis-a"} 0
weir_breaker_transitions_total{name="redis-a",to="closed"} 1
weir_breaker_transitions_total{name="redis-a",to="half_open"} 1
weir_breaker_transitions_total{name="redis-a",to="open"} 1
`)

	for _, want := range []string{
		`level=WARN msg="breaker state changed" name=redis-a from=closed to=open`,
		`level=INFO msg="breaker state changed" name=redis-a from=open to=half_open`,
		`level=INFO msg="breaker state changed" name=redis-a from=half_open to=closed`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

func TestSet_Forget(t *testing.T) {
	s, reg, _ := newTestSet(t)
	old := s.Get("peer-b")
	trip(t, old, 2)
	s.Get("redis-a")
	s.Forget("peer-b")
	wantMetrics(t, reg, `
weir_breaker_state{name="redis-a"} 0
`)
	if got := testutil.CollectAndCount(s.transitions); got != 0 {
		t.Errorf("%d transition series left, want 0", got)
	}

	// The old breaker still works but is no longer exported.
	waitHalfOpen(t, old)
	call(t, old, nil)
	wantState(t, old, Closed)
	wantMetrics(t, reg, `
weir_breaker_state{name="redis-a"} 0
`)

	// The name starts afresh.
	fresh := s.Get("peer-b")
	if fresh == old {
		t.Fatal("Get returned the forgotten breaker")
	}
	wantState(t, fresh, Closed)
	wantMetrics(t, reg, `
weir_breaker_state{name="peer-b"} 0
weir_breaker_state{name="redis-a"} 0
`)
	s.Forget("never-seen") // harmless
}

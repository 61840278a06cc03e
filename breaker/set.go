package breaker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// gaugeValue is a state as exported in weir_breaker_state: ordered by
// severity, so that max() over names reads naturally on a dashboard.
func gaugeValue(s State) float64 {
	switch s {
	case HalfOpen:
		return 1
	case Open:
		return 2
	}
	return 0
}

// Set holds one [Breaker] per name (a Redis endpoint, a peer address), all
// with one Config, and exports their state as metrics and log lines. It is
// safe for concurrent use.
//
// Concurrency: mu guards the map and the metric series. A breaker's
// onChange (which takes mu) runs under that breaker's lock, so the lock
// order is breaker, then set; the set never takes a breaker's lock.
type Set struct {
	cfg    Config
	logger *slog.Logger

	state       *prometheus.GaugeVec
	transitions *prometheus.CounterVec

	mu       sync.RWMutex
	breakers map[string]*Breaker
}

// NewSet returns an empty Set. Metrics are registered on reg (nil: not
// registered); logger (nil: discarded) receives one line per transition. It
// returns an error if cfg is invalid or the metrics cannot be registered.
//
// Metrics: weir_breaker_state{name} is 0 closed, 1 half_open, 2 open;
// weir_breaker_transitions_total{name,to} counts transitions into each
// state.
func NewSet(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Set, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Set{
		cfg: cfg, logger: logger,
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_breaker_state",
			Help: "Circuit breaker state per dependency: 0 closed, 1 half_open, 2 open.",
		}, []string{"name"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_breaker_transitions_total",
			Help: "Circuit breaker transitions per dependency, by state entered.",
		}, []string{"name", "to"}),
		breakers: make(map[string]*Breaker),
	}
	if reg != nil {
		if err := reg.Register(s.state); err != nil {
			return nil, fmt.Errorf("breaker: register metrics: %w", err)
		}
		if err := reg.Register(s.transitions); err != nil {
			reg.Unregister(s.state)
			return nil, fmt.Errorf("breaker: register metrics: %w", err)
		}
	}
	return s, nil
}

// Get returns the breaker for name, creating it closed on first use (and
// again after [Set.Forget]).
func (s *Set) Get(name string) *Breaker {
	s.mu.RLock()
	b, ok := s.breakers[name]
	s.mu.RUnlock()
	if ok {
		return b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.breakers[name]; ok {
		return b
	}
	// The config was validated by NewSet, so New cannot fail; b is assigned
	// before any transition can call changed.
	b, _ = New(name, s.cfg, func(_ string, from, to State) { s.changed(b, from, to) })
	s.breakers[name] = b
	s.state.WithLabelValues(name).Set(gaugeValue(Closed))
	return b
}

// Forget drops the breaker for name and deletes its metric series, for a
// peer that left or an endpoint no longer used. A caller still holding the
// old breaker may keep using it; its transitions are no longer exported.
func (s *Set) Forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.breakers, name)
	s.state.DeleteLabelValues(name)
	s.transitions.DeletePartialMatch(prometheus.Labels{"name": name})
}

// changed is the onChange of b. It runs under b's lock.
func (s *Set) changed(b *Breaker, from, to State) {
	s.mu.Lock()
	current := s.breakers[b.name] == b
	if current {
		s.state.WithLabelValues(b.name).Set(gaugeValue(to))
		s.transitions.WithLabelValues(b.name, to.String()).Inc()
	}
	s.mu.Unlock()
	level := slog.LevelInfo
	if to == Open {
		level = slog.LevelWarn
	}
	s.logger.Log(context.Background(), level, "breaker state changed",
		"name", b.name, "from", from.String(), "to", to.String(), "forgotten", !current)
}

package policy

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
)

// Source provides the policy in force. The limiter depends on this, not on
// Watcher; both a file Watcher and Static satisfy it.
type Source interface {
	// Current returns the active policy, never nil. Safe for concurrent use.
	Current() *Policy
}

var _ Source = (*Watcher)(nil)

// DefaultDebounce is WatcherConfig.Debounce when it is zero.
const DefaultDebounce = 100 * time.Millisecond

// WatcherConfig configures a Watcher.
type WatcherConfig struct {
	// Path is the policy file. Its directory is watched, so the file may be
	// replaced by rename (editors) or by a symlink swap (Kubernetes
	// ConfigMap volumes). Changes to the target of a symlink that lives in
	// another directory, and not swapped through "..data", are not seen:
	// call Reload for those.
	Path string
	// Debounce is how long the directory must be quiet after a change before
	// the file is read, so that a burst of events from one save causes one
	// load. Zero means DefaultDebounce.
	Debounce time.Duration
	// Check, when set, vets every policy read beyond its own validity (a
	// node checks its global limits against its region flags,
	// Policy.RegionWarnings): an error refuses the policy as a bad file
	// is refused (at start, NewWatcher fails; later, the previous policy
	// keeps serving); warnings are logged and the policy is accepted.
	Check func(*Policy) (warnings []string, err error)
}

// Validate reports a config NewWatcher would refuse. It changes nothing.
func (c WatcherConfig) Validate() error {
	switch {
	case c.Path == "":
		return errors.New("policy: watcher: path is required")
	case c.Debounce < 0:
		return fmt.Errorf("policy: watcher: debounce %s is negative", c.Debounce)
	}
	return nil
}

// Watcher holds the active policy of one file and replaces it when the file
// changes and the new content is valid. A bad file is logged, counted and
// otherwise ignored: the previous policy keeps serving.
//
// Concurrency: Current is a lock-free atomic load. Loads (Reload, and Run's
// reloads) are serialised by mu, which also guards the subscribers and the
// last content seen. Only Run starts a goroutine (fsnotify's), and it ends
// before Run returns.
type Watcher struct {
	path     string // "" for Static
	debounce time.Duration
	log      *slog.Logger
	check    func(*Policy) ([]string, error)
	met      *watcherMetrics // nil for Static
	now      func() time.Time

	cur atomic.Pointer[Policy]

	mu struct {
		sync.Mutex
		subs     []chan *Policy
		lastSeen [32]byte // digest of the last content read, good or bad
	}
}

// NewWatcher loads cfg.Path and returns a Watcher serving it; call Run to
// follow changes. It fails, registering nothing, if the config or the file is
// invalid (the error wraps ErrInvalid for a bad policy). logger may be nil.
// Metrics are registered on reg when it is not nil; registering twice on one
// registry is an error.
func NewWatcher(cfg WatcherConfig, logger *slog.Logger, reg prometheus.Registerer) (*Watcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{path: cfg.Path, debounce: cfg.Debounce, log: logger, check: cfg.Check, now: time.Now}
	if w.debounce == 0 {
		w.debounce = DefaultDebounce
	}
	data, err := readFile(w.path)
	if err != nil {
		return nil, err
	}
	digest := sha256.Sum256(data)
	p, err := parse(w.path, data, digest)
	if err == nil {
		err = w.vet(p)
	}
	if err != nil {
		return nil, err
	}
	if w.met, err = newWatcherMetrics(reg); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.lastSeen = digest
	w.acceptLocked(p)
	return w, nil
}

// Static returns a Watcher that always serves p (which must not be nil):
// Reload does nothing, Run only waits, Subscribe never delivers.
func Static(p *Policy) *Watcher {
	if p == nil {
		panic("policy: Static(nil)")
	}
	w := &Watcher{log: slog.New(slog.DiscardHandler), now: time.Now}
	w.cur.Store(p)
	return w
}

// Current returns the active policy. Safe for concurrent use; lock-free.
func (w *Watcher) Current() *Policy { return w.cur.Load() }

// Subscribe returns a channel that receives each newly accepted policy. It
// holds at most one: if the reader falls behind, the older undelivered
// policy is replaced by the newer one. Call it a few times at setup, not per
// request: channels are never released.
func (w *Watcher) Subscribe() <-chan *Policy {
	ch := make(chan *Policy, 1)
	w.mu.Lock()
	w.mu.subs = append(w.mu.subs, ch)
	w.mu.Unlock()
	return ch
}

// Reload reads and parses the file now, whether or not it changed, and
// activates it if valid. A bad file is logged and counted and its error
// (wrapping ErrInvalid when the content is at fault) returned; the previous
// policy keeps serving. Safe for concurrent use. Does nothing for Static.
func (w *Watcher) Reload() error {
	if w.path == "" {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loadLocked(false)
}

// loadLocked reads the file and activates it if valid. With onlyChanged, a
// content identical to the last one read (accepted or not) is skipped
// silently: directory events often come in pairs.
func (w *Watcher) loadLocked(onlyChanged bool) error {
	data, err := readFile(w.path)
	var p *Policy
	if err == nil {
		digest := sha256.Sum256(data)
		if onlyChanged && digest == w.mu.lastSeen {
			return nil
		}
		w.mu.lastSeen = digest
		p, err = parse(w.path, data, digest)
	}
	if err == nil {
		err = w.vet(p)
	}
	if err != nil {
		w.log.Error("policy rejected; the previous policy keeps serving",
			"file", w.path, "error", err, "active_version", w.Current().Version)
		w.met.reloads.WithLabelValues("error").Inc() // after the log: tests wait on it
		return err
	}
	w.acceptLocked(p)
	return nil
}

// vet runs the configured Check on p, logging its warnings.
func (w *Watcher) vet(p *Policy) error {
	if w.check == nil {
		return nil
	}
	warnings, err := w.check(p)
	if err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	for _, msg := range warnings {
		w.log.Warn("policy accepted with a warning", "file", w.path, "version", p.Version, "warning", msg)
	}
	return nil
}

// acceptLocked makes p the active policy, or only records a successful load
// when its content equals the active one's.
func (w *Watcher) acceptLocked(p *Policy) {
	w.met.reloads.WithLabelValues("ok").Inc()
	w.met.lastOK.Set(float64(w.now().UnixNano()) / 1e9)
	old := w.cur.Load()
	if old != nil && old.digest == p.digest {
		return
	}
	if old != nil {
		w.met.info.DeleteLabelValues(old.Version)
		if old.Version == p.Version {
			w.log.Warn("policy content changed but its version did not", "file", w.path, "version", p.Version)
		}
	}
	w.met.info.WithLabelValues(p.Version).Set(1)
	w.cur.Store(p)
	w.log.Info("policy active", "file", w.path, "version", p.Version, "limits", len(p.Limits))
	for _, ch := range w.mu.subs {
		// Only this goroutine sends (mu is held), so after draining a stale
		// value the send cannot block.
		select {
		case ch <- p:
		default:
			select {
			case <-ch:
			default:
			}
			ch <- p
		}
	}
}

// Run follows the file until ctx is done, then returns nil; it returns an
// error only if the directory cannot be watched. Call it at most once, in
// its own goroutine. For Static it just waits for ctx.
func (w *Watcher) Run(ctx context.Context) error {
	if w.path == "" {
		<-ctx.Done()
		return nil
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("policy: watch %s: %w", w.path, err)
	}
	defer fw.Close()
	dir, base := filepath.Split(w.path)
	if dir == "" {
		dir = "."
	}
	if err := fw.Add(dir); err != nil {
		return fmt.Errorf("policy: watch %s: %w", dir, err)
	}
	w.reloadIfChanged() // catch a change made before the watch began
	timer := time.NewTimer(w.debounce)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("policy: watcher closed unexpectedly")
			}
			if relevant(ev.Name, base) {
				timer.Reset(w.debounce)
			}
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("policy: watcher closed unexpectedly")
			}
			w.log.Warn("policy watch error", "file", w.path, "error", err)
		case <-timer.C:
			w.reloadIfChanged()
		}
	}
}

// relevant reports whether an event on name may have changed the file base:
// the file itself, or Kubernetes' atomic-writer entries ("..data",
// "..2026_11_29_..."), through which a ConfigMap's files are symlinked.
func relevant(name, base string) bool {
	b := filepath.Base(name)
	return b == base || strings.HasPrefix(b, "..")
}

func (w *Watcher) reloadIfChanged() {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.loadLocked(true) // logged and counted inside
}

type watcherMetrics struct {
	reloads *prometheus.CounterVec
	info    *prometheus.GaugeVec
	lastOK  prometheus.Gauge
}

func newWatcherMetrics(reg prometheus.Registerer) (*watcherMetrics, error) {
	m := &watcherMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_policy_reloads_total",
			Help: "Policy loads by result (ok or error), the initial load included.",
		}, []string{"result"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_policy_info",
			Help: "1 for the version of the active policy.",
		}, []string{"version"}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_policy_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful policy load.",
		}),
	}
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("error")
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.reloads, m.info, m.lastOK} {
		if err := reg.Register(c); err != nil {
			for _, done := range []prometheus.Collector{m.reloads, m.info, m.lastOK} {
				if done == c {
					break
				}
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("policy: register metrics: %w", err)
		}
	}
	return m, nil
}

package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/chaos/history"
	"github.com/weirhq/weir/rlqs/rlqstest"
)

// Target is one node the workload may call.
type Target struct {
	Name string `json:"name"`
	Addr string `json:"addr"` // gRPC host:port
}

// Class is one kind of request. Each call of the class picks one of Keys
// key indexes (uniformly) and sends Descriptors with every "{k}" in a value
// replaced by that index, and every "{r}" by a number drawn from [0, Spread)
// (a second, independent dimension, such as the users of a hot tenant).
type Class struct {
	Name        string            `json:"name"`
	Weight      float64           `json:"weight"` // share of the offered rate
	Keys        int               `json:"keys"`
	Descriptors map[string]string `json:"descriptors"`
	Cost        int64             `json:"cost"`
	Spread      int               `json:"spread,omitempty"`
	// Limits are the enforced limits a call of this class is expected to
	// match; they are recorded when the call gets no answer.
	Limits []string `json:"limits"`
	// RLQS, when set, sends the class through emulated Envoys instead of
	// Decide calls: one rlqstest.Client per target, deciding each request
	// locally from the assignments its RLQS stream receives. Descriptors
	// are the bucket id (Keys must be 1); each operation is one local
	// decision, recorded against Limits[0] and RLQS.Key.
	RLQS *RLQS `json:"rlqs,omitempty"`
	// Hold, when set, makes the class's limit a concurrency limit's: an
	// admitted call holds the permit it got for a while, then releases it
	// (or, for a share of calls, "crashes" and never does).
	Hold *Hold `json:"hold,omitempty"`
}

// Hold is how a concurrency class's callers use their permits: each holds
// one for a time drawn uniformly from [Min, Max]; a Crash share never
// releases it, and a Renew share renews it half-way through the hold.
type Hold struct {
	Min   time.Duration `json:"min"`
	Max   time.Duration `json:"max"`
	Crash float64       `json:"crash"`
	Renew float64       `json:"renew"`
}

// RLQS is how an RLQS class's Envoys are configured.
type RLQS struct {
	Domain string `json:"domain"`
	// Key is the limit's storage key the bucket maps to, recorded on every
	// operation (the Envoy does not know it).
	Key               string        `json:"key"`
	ReportingInterval time.Duration `json:"reporting_interval"`
}

// Config is a workload.
type Config struct {
	Targets  []Target      `json:"targets"`
	Classes  []Class       `json:"classes"`
	Rate     float64       `json:"rate"`     // calls per second, all classes together
	Duration time.Duration `json:"duration"` // stop offering after this long
	Deadline time.Duration `json:"deadline"` // each call's deadline
	// MaxInFlight caps concurrent calls; a call that would exceed it is
	// recorded as a timeout at once (the caller could not even send it).
	MaxInFlight int    `json:"max_in_flight"`
	Seed        uint64 `json:"seed"`
	// Worker numbers this client's operations, so several clients' histories
	// can be merged.
	Worker int `json:"worker"`
	// Workers > 0 makes the workload closed loop instead: that many
	// workers, worker i bound to target i mod len(Targets), each sending its
	// next call as soon as the previous one is answered (Rate and
	// MaxInFlight are then unused). This is how a fixed pool of callers
	// hammers one key: a slow node slows its callers down instead of
	// piling up calls.
	Workers int `json:"workers,omitempty"`
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if len(c.Targets) == 0 {
		errs = append(errs, errors.New("workload: no targets"))
	}
	if len(c.Classes) == 0 {
		errs = append(errs, errors.New("workload: no classes"))
	}
	for _, cl := range c.Classes {
		if r := cl.RLQS; r != nil && (r.Domain == "" || r.Key == "" || r.ReportingInterval <= 0 || cl.Keys != 1 || cl.Cost != 1 || len(cl.Limits) != 1 || c.Workers > 0) {
			errs = append(errs, fmt.Errorf("workload: rlqs class %q needs a domain, a key, a reporting interval, one key, cost 1, one limit and an open loop", cl.Name))
		}
		if h := cl.Hold; h != nil && (h.Min < 0 || h.Max < h.Min || h.Crash < 0 || h.Renew < 0 || h.Crash+h.Renew > 1 || cl.RLQS != nil) {
			errs = append(errs, fmt.Errorf("workload: hold of class %q needs 0 <= min <= max, crash and renew shares summing to at most 1, and no rlqs", cl.Name))
		}
		if cl.Name == "" || cl.Weight <= 0 || cl.Keys <= 0 || cl.Cost <= 0 || cl.Spread < 0 || len(cl.Descriptors) == 0 {
			errs = append(errs, fmt.Errorf("workload: class %q needs a name, weight > 0, keys > 0, cost > 0, spread >= 0 and descriptors", cl.Name))
		}
	}
	switch {
	case c.Workers < 0:
		errs = append(errs, fmt.Errorf("workload: workers (%d) must not be negative", c.Workers))
	case c.Workers > 0 && (c.Duration <= 0 || c.Deadline <= 0):
		errs = append(errs, fmt.Errorf("workload: duration (%s) and deadline (%s) must be positive", c.Duration, c.Deadline))
	case c.Workers == 0 && (c.Rate <= 0 || c.Duration <= 0 || c.Deadline <= 0 || c.MaxInFlight <= 0):
		errs = append(errs, fmt.Errorf("workload: rate (%v), duration (%s), deadline (%s) and max_in_flight (%d) must be positive",
			c.Rate, c.Duration, c.Deadline, c.MaxInFlight))
	}
	return errors.Join(errs...)
}

// Stats counts what a run did.
type Stats struct {
	Ops      int64
	Outcomes map[history.Outcome]int64
}

// Run offers the workload until Duration has passed or ctx is done, then
// waits for the calls in flight and returns. Every call is written to w.
func Run(ctx context.Context, cfg Config, w *history.Writer) (Stats, error) {
	if err := cfg.Validate(); err != nil {
		return Stats{}, err
	}
	clients := make([]weirv1.RateLimiterClient, len(cfg.Targets))
	envoys := map[*Class][]*rlqstest.Client{} // per RLQS class, one per target
	for i, t := range cfg.Targets {
		// Reconnect quickly after a node restarts: the default backoff grows
		// to two minutes, which would hide a recovered node from the run.
		conn, err := grpc.NewClient(t.Addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
				MinConnectTimeout: cfg.Deadline,
			}))
		if err != nil {
			return Stats{}, fmt.Errorf("workload: dial %s (%s): %w", t.Name, t.Addr, err)
		}
		defer conn.Close()
		clients[i] = weirv1.NewRateLimiterClient(conn)
		for ci := range cfg.Classes {
			if r := cfg.Classes[ci].RLQS; r != nil {
				e := rlqstest.NewClient(conn, rlqstest.FilterConfig{Domain: r.Domain, ReportingInterval: r.ReportingInterval})
				defer e.Close()
				envoys[&cfg.Classes[ci]] = append(envoys[&cfg.Classes[ci]], e)
			}
		}
	}

	var (
		mu    sync.Mutex
		stats = Stats{Outcomes: map[history.Outcome]int64{}}
		werr  error
	)
	record := func(op history.Op) {
		mu.Lock()
		defer mu.Unlock()
		stats.Ops++
		stats.Outcomes[op.Outcome]++
		if err := w.Op(op); err != nil && werr == nil {
			werr = err
		}
	}
	if cfg.Workers > 0 {
		closedLoop(ctx, cfg, clients, record)
	} else {
		openLoop(ctx, cfg, clients, envoys, record)
	}
	if err := w.Flush(); err != nil && werr == nil {
		werr = err
	}
	return stats, werr
}

// pick draws a class, a key and a spread value.
func pick(rng *rand.Rand, classes []Class, total float64) (cl *Class, key, spread int) {
	x := rng.Float64() * total
	ci := 0
	for ci < len(classes)-1 && x >= classes[ci].Weight {
		x -= classes[ci].Weight
		ci++
	}
	cl = &classes[ci]
	key = rng.IntN(cl.Keys)
	if cl.Spread > 0 {
		spread = rng.IntN(cl.Spread)
	}
	return cl, key, spread
}

func totalWeight(classes []Class) float64 {
	var total float64
	for _, cl := range classes {
		total += cl.Weight
	}
	return total
}

// errorPause is how long a closed-loop worker waits after a call that
// failed without using its deadline.
const errorPause = 10 * time.Millisecond

// closedLoop runs cfg.Workers workers until Duration has passed or ctx is
// done; each waits for its call's answer before sending the next.
func closedLoop(ctx context.Context, cfg Config, clients []weirv1.RateLimiterClient, record func(history.Op)) {
	total := totalWeight(cfg.Classes)
	end := time.Now().Add(cfg.Duration)
	var ids atomic.Int64
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		ti := i % len(cfg.Targets)
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Worker)<<16|uint64(i)))
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(end) {
				cl, key, spread := pick(rng, cfg.Classes, total)
				op := history.Op{ID: ids.Add(1) - 1, Worker: cfg.Worker, Node: cfg.Targets[ti].Name, Class: cl.Name, Cost: cl.Cost}
				op, permit := call(clients[ti], cl, descriptors(cl, key, spread), op, cfg.Deadline)
				record(hold(ctx, clients[ti], cl, op, permit, cfg))
				if op.Outcome == history.Error {
					// A refused connection fails at once: pause as a
					// caller's retry would, instead of spinning.
					select {
					case <-ctx.Done():
					case <-time.After(errorPause):
					}
				}
			}
		})
	}
	wg.Wait()
}

// openLoop sends calls at cfg.Rate to random targets until Duration has
// passed or ctx is done, then waits for the calls in flight.
func openLoop(ctx context.Context, cfg Config, clients []weirv1.RateLimiterClient, envoys map[*Class][]*rlqstest.Client, record func(history.Op)) {
	total := totalWeight(cfg.Classes)
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Worker)))
	var (
		wg       sync.WaitGroup
		inFlight atomic.Int64
	)

	interval := time.Duration(float64(time.Second) / cfg.Rate)
	start := time.Now()
	end := start.Add(cfg.Duration)
	for i := int64(0); ; i++ {
		due := start.Add(time.Duration(i) * interval)
		if !due.Before(end) {
			break
		}
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		// Draw everything from the one generator here, so a seed replays.
		cl, key, spread := pick(rng, cfg.Classes, total)
		ti := rng.IntN(len(cfg.Targets))
		op := history.Op{ID: i, Worker: cfg.Worker, Node: cfg.Targets[ti].Name, Class: cl.Name, Cost: cl.Cost}
		desc := descriptors(cl, key, spread)
		if es := envoys[cl]; es != nil {
			record(local(es[ti], cl, desc, op))
			continue
		}
		if inFlight.Add(1) > int64(cfg.MaxInFlight) {
			inFlight.Add(-1)
			now := time.Now().UnixNano()
			op.Invoke, op.Complete, op.Outcome = now, now, history.Timeout
			op.Err = "client: too many calls in flight"
			op.Limits = expected(cl)
			record(op)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer inFlight.Add(-1)
			op, permit := call(clients[ti], cl, desc, op, cfg.Deadline)
			record(hold(ctx, clients[ti], cl, op, permit, cfg))
		}()
	}
	wg.Wait()
}

// call makes one Decide call and describes it as an operation; permit is
// the permit an admitted call of a Hold class got.
func call(c weirv1.RateLimiterClient, cl *Class, desc map[string]string, op history.Op, deadline time.Duration) (_ history.Op, permit []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	op.Invoke = time.Now().UnixNano()
	resp, err := c.Decide(ctx, &weirv1.DecideRequest{Descriptors: desc, Cost: new(cl.Cost)})
	op.Complete = time.Now().UnixNano()
	if err != nil {
		op.Limits = expected(cl)
		op.Err = err.Error()
		op.Outcome = history.Error
		// A call that used up its deadline timed out, whatever error the
		// transport surfaced first.
		if status.Code(err) == codes.DeadlineExceeded || ctx.Err() != nil || op.Latency() >= deadline {
			op.Outcome = history.Timeout
		}
		return op, nil
	}
	op.Outcome = history.Denied
	if resp.GetAllowed() {
		op.Outcome = history.Allowed
	}
	if fb := resp.GetFallback(); fb != nil {
		op.FallbackMode, op.FallbackReason = fb.GetMode(), fb.GetReason()
	}
	op.RetryAfter = resp.GetRetryAfter().AsDuration()
	if cl.Hold != nil {
		op.Permit = &history.PermitLife{Granted: len(resp.GetPermit()) > 0}
		permit = resp.GetPermit()
	}
	for _, l := range resp.GetLimits() {
		if !l.GetShadow() {
			op.Limits = append(op.Limits, history.LimitKey{Name: l.GetName(), Key: l.GetKey(), Denied: !l.GetAllowed()})
		}
	}
	return op, permit
}

// hold plays a Hold class's caller after its call: it keeps the permit
// for the drawn time, renewing it half-way for the Renew share, then
// releases it, or drops it at once for the Crash share. The draws come
// from the operation's own generator, so a seed replays. Calls without a
// permit, and of other classes, return op unchanged.
func hold(ctx context.Context, c weirv1.RateLimiterClient, cl *Class, op history.Op, permit []byte, cfg Config) history.Op {
	h := cl.Hold
	if h == nil || len(permit) == 0 {
		return op
	}
	rng := rand.New(rand.NewPCG(cfg.Seed^0x9e3779b97f4a7c15, uint64(cfg.Worker)<<40|uint64(op.ID)))
	x := rng.Float64()
	if x < h.Crash {
		op.Permit.Crashed = true
		return op
	}
	d := h.Min
	if h.Max > h.Min {
		d += time.Duration(rng.Int64N(int64(h.Max - h.Min)))
	}
	renew := x < h.Crash+h.Renew
	if renew {
		pause(ctx, d/2)
		rctx, cancel := context.WithTimeout(context.Background(), cfg.Deadline)
		op.Permit.RenewInvoke = time.Now().UnixNano()
		resp, err := c.Renew(rctx, &weirv1.RenewRequest{Permit: permit})
		op.Permit.RenewComplete = time.Now().UnixNano()
		cancel()
		op.Permit.Renewed = err == nil && resp.GetRenewed()
		d -= d / 2
	}
	pause(ctx, d)
	// The release goes out even when the run is ending: a caller that
	// stops releases what it holds.
	rctx, cancel := context.WithTimeout(context.Background(), cfg.Deadline)
	defer cancel()
	op.Permit.ReleaseInvoke = time.Now().UnixNano()
	resp, err := c.Release(rctx, &weirv1.ReleaseRequest{Permit: permit})
	op.Permit.ReleaseComplete = time.Now().UnixNano()
	op.Permit.Released = err == nil && resp.GetReleased()
	return op
}

func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// local decides one request of an RLQS class in its emulated Envoy, as
// Envoy's filter does: no call, the decision is made at once.
func local(e *rlqstest.Client, cl *Class, desc map[string]string, op history.Op) history.Op {
	op.Invoke = time.Now().UnixNano()
	allowed := e.Request(desc)
	op.Complete = time.Now().UnixNano()
	op.Outcome = history.Denied
	if allowed {
		op.Outcome = history.Allowed
	}
	op.Limits = []history.LimitKey{{Name: cl.Limits[0], Key: cl.RLQS.Key, Denied: !allowed}}
	return op
}

func descriptors(cl *Class, key, spread int) map[string]string {
	r := strings.NewReplacer("{k}", strconv.Itoa(key), "{r}", strconv.Itoa(spread))
	d := make(map[string]string, len(cl.Descriptors))
	for name, v := range cl.Descriptors {
		d[name] = r.Replace(v)
	}
	return d
}

func expected(cl *Class) []history.LimitKey {
	out := make([]history.LimitKey, len(cl.Limits))
	for i, name := range cl.Limits {
		out[i] = history.LimitKey{Name: name}
	}
	return out
}

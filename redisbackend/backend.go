package redisbackend

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/gcra"
)

// MaxSpan is the largest Interval*Burst a limit may have here, 2^52
// nanoseconds (about 52 days; policy.MaxSpan is 50 days). It is far below
// [gcra.MaxSpan] because the script computes how far a key is ahead of now
// in Lua doubles, which are exact integers only below 2^53.
const MaxSpan = int64(1) << 52

// MaxTime is the largest explicit now (Unix nanoseconds) Decide accepts,
// 2^53 microseconds (about the year 2255): the script holds instants as
// whole microseconds plus nanoseconds past them, and the microseconds must
// be exact doubles.
const MaxTime = int64(1)<<53*1000 - 1

// ErrCrossSlot is returned by Decide and DecidePipelined (per item) when the
// keys of one decision do not all carry the same non-empty hash tag, so they
// could live in different Redis Cluster slots. Nothing is sent to Redis.
var ErrCrossSlot = errors.New("redisbackend: keys of one decision must share one hash tag")

// Backend decides and persists GCRA state in Redis. It works the same on a
// single Redis and on Redis Cluster. It is safe for concurrent use; it holds
// no state of its own beyond the client and the script handle.
type Backend struct {
	client redis.UniversalClient
	cfg    Config
	script *redis.Script
	store  *redis.Script // StoreTATs: never moves a TAT backwards
}

// New returns a Backend using client, which the caller keeps owning (and
// closes). The client must have ContextTimeoutEnabled set: without it
// go-redis ignores context deadlines on socket reads, and a stalled Redis
// would hold callers for the client's ReadTimeout instead of cfg.Timeout.
// New checks that for *redis.Client and *redis.ClusterClient.
func New(client redis.UniversalClient, cfg Config) (*Backend, error) {
	if client == nil {
		return nil, errors.New("redisbackend: nil client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkClient(client); err != nil {
		return nil, err
	}
	return &Backend{client: client, cfg: cfg, script: newDecideScript(), store: redis.NewScript(storeLua)}, nil
}

func checkClient(client redis.UniversalClient) error {
	enabled := true
	switch c := client.(type) {
	case *redis.Client:
		enabled = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		enabled = c.Options().ContextTimeoutEnabled
	}
	if !enabled {
		return errors.New("redisbackend: client needs ContextTimeoutEnabled: true, or deadlines are not enforced on a stalled Redis")
	}
	return nil
}

// Decision is the outcome of one composite decision.
type Decision struct {
	// Overall aggregates the limits as gcra.DecideComposite does: allowed
	// only if every limit allows, the largest RetryAfter and ResetAfter, the
	// smallest Remaining, TooCostly if any limit's burst is below the cost.
	// Its TAT is meaningless.
	Overall gcra.Result
	// Results holds one result per key, in the order of the keys.
	Results []gcra.Result
	// Now is the time the script decided at, in Unix nanoseconds: Redis
	// TIME (whole microseconds), or the caller's explicit now.
	Now int64
}

// DecideRequest is one composite decision for [Backend.DecidePipelined],
// with the same meaning as Decide's arguments.
type DecideRequest struct {
	Keys   []string
	Limits []gcra.Limit
	Cost   int64
	Now    int64
}

// Decide runs one composite decision atomically in Redis: keys[i] is
// decided against limits[i], every limit is evaluated first, and the new
// TATs are written (with PX expiry) only if every limit admits the request.
//
// now == 0 uses the Redis server's TIME, the normal case; a non-zero now
// (Unix nanoseconds, <= MaxTime) is used instead, for tests, replay and owners
// that track their offset to Redis TIME.
//
// Input is checked before anything is sent: 1 or more distinct keys,
// len(keys) == len(limits), cost > 0, every limit valid with a span of at
// most MaxSpan. Keys of a multi-key decision must share one hash tag, or
// the error wraps [ErrCrossSlot]. Invalid cost and limits wrap
// gcra.ErrInvalidCost and gcra.ErrInvalidLimit. The call is bounded by
// ctx and Config.Timeout; on a timeout the decision may or may not have
// been applied.
func (b *Backend) Decide(ctx context.Context, keys []string, limits []gcra.Limit, cost int64, now int64) (Decision, error) {
	args, err := scriptArgs(keys, limits, cost, now)
	if err != nil {
		return Decision{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	reply, err := b.script.Run(ctx, b.client, keys, args...).Int64Slice()
	if err != nil {
		b.noteError(err)
		return Decision{}, fmt.Errorf("redisbackend: decide %q: %w", keys[0], err)
	}
	return parseReply(reply, len(keys))
}

// Validate reports whether r is a decision [Backend.Decide] would send,
// with the error Decide returns for it otherwise (see Decide for the
// rules). It changes nothing and sends nothing; in-memory twins of the
// Backend (redistest.Memory) call it so that they refuse exactly what the
// Backend refuses.
func (r DecideRequest) Validate() error {
	if len(r.Keys) != len(r.Limits) {
		return fmt.Errorf("redisbackend: %d keys for %d limits", len(r.Keys), len(r.Limits))
	}
	if err := checkKeys(r.Keys); err != nil {
		return err
	}
	if r.Cost <= 0 {
		return fmt.Errorf("redisbackend: %w: got %d", gcra.ErrInvalidCost, r.Cost)
	}
	if r.Now < 0 || r.Now > MaxTime {
		return fmt.Errorf("redisbackend: now %dns outside [0, %d]", r.Now, MaxTime)
	}
	for i, l := range r.Limits {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("redisbackend: limit %d: %w", i, err)
		}
		if l.Span() > MaxSpan {
			return fmt.Errorf("redisbackend: limit %d: %w: span %dns exceeds %dns", i, gcra.ErrInvalidLimit, l.Span(), MaxSpan)
		}
	}
	return nil
}

// scriptArgs validates one decision and builds the script's ARGV.
func scriptArgs(keys []string, limits []gcra.Limit, cost int64, now int64) ([]any, error) {
	if err := (DecideRequest{Keys: keys, Limits: limits, Cost: cost, Now: now}).Validate(); err != nil {
		return nil, err
	}
	args := make([]any, 0, 3+2*len(limits))
	args = append(args, cost, now/1000, now%1000)
	for _, l := range limits {
		args = append(args, l.Interval, l.Burst)
	}
	return args, nil
}

// parseReply turns the script's integer array into a Decision, aggregating
// exactly as gcra.DecideComposite does.
func parseReply(r []int64, n int) (Decision, error) {
	if len(r) != replyHead+replyPerKey*n {
		return Decision{}, fmt.Errorf("redisbackend: script returned %d values for %d keys", len(r), n)
	}
	d := Decision{Now: r[0]*1000 + r[1], Results: make([]gcra.Result, n)}
	agg := gcra.Result{Allowed: r[2] == 1, Remaining: -1}
	for i := range n {
		v := r[replyHead+replyPerKey*i:]
		res := gcra.Result{
			Allowed:    v[0] == 1,
			TooCostly:  v[1] == 1,
			TAT:        v[2]*1000 + v[3],
			RetryAfter: v[4],
			Remaining:  v[5],
			ResetAfter: v[6],
		}
		d.Results[i] = res
		agg.TooCostly = agg.TooCostly || res.TooCostly
		agg.RetryAfter = max(agg.RetryAfter, res.RetryAfter)
		agg.ResetAfter = max(agg.ResetAfter, res.ResetAfter)
		if agg.Remaining < 0 || res.Remaining < agg.Remaining {
			agg.Remaining = res.Remaining
		}
	}
	if agg.TooCostly {
		agg.RetryAfter = 0 // as gcra.DecideComposite: no wait makes it pass
	}
	d.Overall = agg
	return d, nil
}

package intake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/limitkey"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/policy"
)

// ErrRefused is wrapped by the per-item error a Validator answers for an
// item it will not pass to its Handler. Nothing was decided for that item.
var ErrRefused = errors.New("intake: forwarded item refused")

// ReasonRefused is the Result.Reason of a refused item.
const ReasonRefused = "forward_refused"

// Defaults of ValidatorConfig.
const (
	// DefaultMaxSkew is how far a forwarded item's Now may lie from the
	// owner's clock. Nodes share Redis's clock, or NTP-synchronised clocks
	// in embedded mode, and a forward lives for milliseconds.
	DefaultMaxSkew = 2 * time.Second
	// DefaultMaxKeys bounds the keys (limits) of one item: a composite
	// decision has one key per matched limit.
	DefaultMaxKeys = peer.DefaultMaxKeys
	// DefaultMaxKeyBytes is the longest key the public API can produce:
	// "weir:{" + group + "}:" + name + (":" + value) per descriptor, with a
	// 64-byte name, at most limiter.MaxDescriptors values of at most
	// limiter.MaxDescriptorBytes bytes, each byte escaped to three at worst.
	DefaultMaxKeyBytes = len("weir:{}:") + 64 + 3*limiter.MaxDescriptorBytes +
		limiter.MaxDescriptors*(1+3*limiter.MaxDescriptorBytes)
)

// The peer plane's wire bounds are sized for the largest valid item.
var _ = [1]struct{}{}[DefaultMaxKeyBytes-peer.DefaultMaxKeyBytes]

// ValidatorConfig bounds the forwarded work an owner accepts. Zero fields
// mean their defaults.
type ValidatorConfig struct {
	// MaxSkew is the largest distance between an item's Now and the
	// owner's clock. A forged Now (years ahead, or near the int64 limit)
	// would lock or reset a key; one off by more than MaxSkew is refused.
	MaxSkew time.Duration
	// MaxKeys bounds the keys of one item.
	MaxKeys int
	// MaxKeyBytes bounds one key's length.
	MaxKeyBytes int
}

// DefaultValidatorConfig returns MaxSkew DefaultMaxSkew, MaxKeys
// DefaultMaxKeys and MaxKeyBytes DefaultMaxKeyBytes.
func DefaultValidatorConfig() ValidatorConfig {
	return ValidatorConfig{MaxSkew: DefaultMaxSkew, MaxKeys: DefaultMaxKeys, MaxKeyBytes: DefaultMaxKeyBytes}
}

// Validate reports the first problem with c, or nil. It changes nothing.
func (c ValidatorConfig) Validate() error {
	switch {
	case c.MaxSkew < 0:
		return fmt.Errorf("intake: negative max skew %v", c.MaxSkew)
	case c.MaxKeys < 0:
		return fmt.Errorf("intake: negative max keys %d", c.MaxKeys)
	case c.MaxKeyBytes < 0:
		return fmt.Errorf("intake: negative max key bytes %d", c.MaxKeyBytes)
	}
	return nil
}

func (c ValidatorConfig) withDefaults() ValidatorConfig {
	d := DefaultValidatorConfig()
	if c.MaxSkew == 0 {
		c.MaxSkew = d.MaxSkew
	}
	if c.MaxKeys == 0 {
		c.MaxKeys = d.MaxKeys
	}
	if c.MaxKeyBytes == 0 {
		c.MaxKeyBytes = d.MaxKeyBytes
	}
	return c
}

// PolicySource returns the owner's current policy (limiter.PolicySource
// and policy.Watcher satisfy it).
type PolicySource interface {
	Current() *policy.Policy
}

// Validator is a peer.Handler that checks every forwarded item as strictly as
// the public API checks a request, before its inner Handler sees it, and
// decides with the owner's own numbers where its policy has them. It
// resolves each key against the owner's policy once (policy.KeyLimit) and
// fills the item's Defs from it, so the owner's lease, region and debt code
// read Defs and never parse a key again. Wrap the Owner in it and register
// the Validator on the peer server (peer.Register). Safe for concurrent use.
//
// An item is refused (Result.Err wrapping ErrRefused, Reason
// ReasonRefused, nothing decided, counted in
// weir_peer_items_refused_total by reason) when:
//   - shape: it has no keys, more than MaxKeys, keys and limits that do
//     not pair up, a key longer than MaxKeyBytes or not UTF-8, a key
//     repeated in the item, or a cost
//     outside [1, limiter.MaxCost] (0 on an item with Op, whose kind,
//     id, TTL and Actual must be valid: checkOp);
//   - skew: its Now is more than MaxSkew from the owner's clock;
//   - group: a key's hash tag is not the item's group;
//   - params: a limit outside the ranges a policy accepts
//     (policy.CheckParams), or, for a limit whose numbers depend on a
//     tenant the key does not carry, numbers the owner's policy never
//     gives that limit (a concurrency key's permit bound is checked as
//     one: policy.CheckPermitParams);
//   - kind: the item asks of its keys what their limits' kinds do not
//     allow (checkKinds): Reserve beside a strict or global key, an Op on
//     keys the policy does not know or of the wrong kind (Settle on rate
//     keys, Release and Renew on concurrency keys), a concurrency key in
//     a strict or debt item.
//
// For a key whose limit and tenant the owner's policy recognises
// (policy.KeyExact) the owner's numbers replace the sender's; replacements
// are counted in weir_peer_params_replaced_total.
type Validator struct {
	cfg      ValidatorConfig
	next     peer.Handler
	policies PolicySource
	now      func() int64
	refused  *prometheus.CounterVec
	replaced prometheus.Counter
	// defOf is (*policy.Limit).Def; tests mark limits concurrency with it.
	defOf func(*policy.Limit) *decide.Def
}

var _ peer.Handler = (*Validator)(nil)

// NewValidator returns a Validator in front of next. now is the owner's
// time base in Unix nanoseconds (the clock its own requests are stamped with).
// A nil reg registers nothing.
func NewValidator(cfg ValidatorConfig, next peer.Handler, policies PolicySource, now func() int64, reg prometheus.Registerer) (*Validator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if next == nil || policies == nil || now == nil {
		return nil, errors.New("intake: NewValidator needs a handler, a policy source and a clock")
	}
	v := &Validator{
		cfg: cfg.withDefaults(), next: next, policies: policies, now: now, defOf: (*policy.Limit).Def,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_peer_items_refused_total",
			Help: "Forwarded items the owner refused without deciding, by reason (shape, skew, group, params, kind, lease).",
		}, []string{"reason"}),
		replaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_peer_params_replaced_total",
			Help: "Limits of forwarded items decided with the owner's numbers instead of differing ones the sender sent.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{v.refused, v.replaced} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// HandleDecide checks every item and passes the accepted ones, in order,
// to the inner Handler in one call; refused items get their error.
func (v *Validator) HandleDecide(ctx context.Context, from string, items []decide.Request) []peer.Result {
	results := make([]peer.Result, len(items))
	pass := make([]decide.Request, 0, len(items))
	idx := make([]int, 0, len(items))
	now, p := v.now(), v.policies.Current()
	for i := range items {
		it, reason, err := v.check(&items[i], now, p)
		if err != nil {
			v.refused.WithLabelValues(reason).Inc()
			results[i] = peer.Result{Err: fmt.Errorf("%w: %w", ErrRefused, err), Reason: ReasonRefused}
			continue
		}
		pass = append(pass, it)
		idx = append(idx, i)
	}
	if len(pass) == 0 {
		return results
	}
	rs := v.next.HandleDecide(ctx, from, pass)
	for j, i := range idx {
		if j < len(rs) {
			results[i] = rs[j]
		} else {
			results[i] = peer.Result{Err: errors.New("intake: handler returned too few results")}
		}
	}
	return results
}

// check returns the item to decide (with the owner's numbers and Defs), or
// the refusal's metric reason and error. Each key is resolved against p
// once.
func (v *Validator) check(it *decide.Request, now int64, p *policy.Policy) (decide.Request, string, error) {
	if err := v.checkShape(it); err != nil {
		return decide.Request{}, "shape", err
	}
	if skew := it.Now - now; skew > v.cfg.MaxSkew.Nanoseconds() || skew < -v.cfg.MaxSkew.Nanoseconds() {
		return decide.Request{}, "skew", fmt.Errorf("now %dns is %s off the owner's clock, over %s", it.Now, skewString(it.Now, now), v.cfg.MaxSkew)
	}
	tag := limitkey.GroupTag(it.Group)
	out, cloned := *it, false
	out.Defs = make([]*decide.Def, len(it.Keys)) // never the sender's: the wire carries none
	for i, key := range it.Keys {
		if got := limitkey.HashTag(key); got != tag || tag == "" {
			return decide.Request{}, "group", fmt.Errorf("key %d has hash tag %q, not the item's group %q", i, got, it.Group)
		}
		lim, set, how := keyLimit(p, key)
		var def *decide.Def
		if lim != nil {
			def = v.defOf(lim)
		}
		check := policy.CheckParams
		if def != nil && def.Concurrency {
			check = policy.CheckPermitParams
		}
		l, err := v.params(set, how, it.Limits[i], check)
		if err != nil {
			return decide.Request{}, "params", fmt.Errorf("key %d: %w", i, err)
		}
		if l != it.Limits[i] {
			if !cloned {
				out.Limits, cloned = slices.Clone(it.Limits), true // never write the sender's slice
			}
			out.Limits[i] = l
			v.replaced.Inc()
		}
		out.Defs[i] = def
	}
	if err := checkKinds(&out); err != nil {
		return decide.Request{}, "kind", err
	}
	return out, "", nil
}

// keyLimit is p.KeyLimit, with no policy knowing no key.
func keyLimit(p *policy.Policy, key string) (*policy.Limit, []gcra.Limit, policy.KeyMatch) {
	if p == nil {
		return nil, nil, policy.KeyUnknown
	}
	return p.KeyLimit(key)
}

func (v *Validator) checkShape(it *decide.Request) error {
	switch n := len(it.Keys); {
	case n == 0:
		return errors.New("no keys")
	case n > v.cfg.MaxKeys:
		return fmt.Errorf("%d keys exceed %d", n, v.cfg.MaxKeys)
	case n != len(it.Limits):
		return fmt.Errorf("%d keys for %d limits", n, len(it.Limits))
	case it.Op == nil && (it.Cost < 1 || it.Cost > limiter.MaxCost):
		return fmt.Errorf("cost %d outside [1, %d]", it.Cost, limiter.MaxCost)
	case it.Op != nil && it.Cost != 0:
		return fmt.Errorf("op item of cost %d, not 0", it.Cost)
	case it.Op != nil:
		if err := checkOp(it); err != nil {
			return err
		}
	}
	for i, key := range it.Keys {
		if len(key) > v.cfg.MaxKeyBytes || !utf8.ValidString(key) {
			return fmt.Errorf("key %d is %d bytes (at most %d) or not UTF-8", i, len(key), v.cfg.MaxKeyBytes)
		}
		// A sender's limiter charges a repeated key once and never forwards
		// it twice; Redis would refuse it and memory would charge it once.
		if slices.Contains(it.Keys[:i], key) {
			return fmt.Errorf("key %d repeats an earlier key", i)
		}
	}
	return nil
}

// params returns the numbers to decide a key with, given what the owner's
// policy gives its limit (set, how: policy.KeyLimit): the owner's where its
// policy determines them, otherwise sent if a policy could give them.
func (v *Validator) params(set []gcra.Limit, how policy.KeyMatch, sent gcra.Limit, check func(gcra.Limit) error) (gcra.Limit, error) {
	switch how {
	case policy.KeyExact:
		sent = set[0] // the owner's numbers, checked below like any
	case policy.KeyAmbiguous:
		if !slices.Contains(set, sent) {
			return gcra.Limit{}, fmt.Errorf("limit %+v is none the owner's policy gives this key", sent)
		}
	}
	if err := check(sent); err != nil {
		return gcra.Limit{}, err
	}
	return sent, nil
}

// skewString says how far a is from b, without overflowing.
func skewString(a, b int64) string {
	return fmt.Sprintf("%.3gs", (float64(a)-float64(b))/1e9)
}

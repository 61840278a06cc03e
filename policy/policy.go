package policy

import (
	"errors"
	"github.com/weirhq/weir/decide"
	"slices"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
)

var (
	// ErrInvalid is wrapped by every error about a malformed policy or rate:
	// Parse, LoadFile, ParseRate, NewWatcher and Watcher.Reload.
	ErrInvalid = errors.New("policy: invalid")
	// ErrUnknownDescriptor is wrapped by Resolve when the policy rejects
	// unknown descriptors and a request carries a name no limit uses.
	ErrUnknownDescriptor = errors.New("policy: unknown descriptor")
)

// Consistency says who decides a limit.
type Consistency string

const (
	// ConsistencyFast: the group's owner node decides in memory and persists
	// TATs to Redis in the background. The default.
	ConsistencyFast Consistency = "fast"
	// ConsistencyStrict: every decision is made by Redis.
	ConsistencyStrict Consistency = "strict"
)

// FailureMode says what a limit does when its decider is unreachable.
type FailureMode string

const (
	// FailOpen admits the request. Only a policy that writes it gets it:
	// a fault then admits without bound, which `weir policy check` warns
	// about.
	FailOpen FailureMode = "open"
	// FailClosed denies the request.
	FailClosed FailureMode = "closed"
	// FailLocal decides in the local node's memory, with Limit.Fallback or,
	// when the policy gives no fallback_rate, with the node's share of the
	// limit (see Limit.SharedFallback). The default.
	FailLocal FailureMode = "local"
)

// Scope says how far a limit's budget reaches.
type Scope string

const (
	// ScopeRegion: each region enforces the full limit on its own. The default.
	ScopeRegion Scope = "region"
	// ScopeGlobal: the limit is shared by all regions, split into shares.
	ScopeGlobal Scope = "global"
)

// UnknownDescriptors says what Resolve does with a descriptor name that no
// limit uses.
type UnknownDescriptors string

const (
	// UnknownReject makes Resolve fail with ErrUnknownDescriptor. The default.
	UnknownReject UnknownDescriptors = "reject"
	// UnknownIgnore makes Resolve skip the descriptor.
	UnknownIgnore UnknownDescriptors = "ignore"
)

// Policy is a validated, versioned set of limits. It is immutable once built
// (callers must not modify its fields or its Limits) and safe for concurrent
// use.
type Policy struct {
	// Version is the file's version field, or "sha256:" and the first 12 hex
	// digits of the file's SHA-256 when it has none.
	Version string
	// Source names where the policy came from (a file name), for messages.
	Source string
	// Limits in file order. Resolve reports matches in this order.
	Limits []*Limit
	// UnknownDescriptors is the policy's unknown_descriptors setting.
	UnknownDescriptors UnknownDescriptors
	// TenantDescriptor names the descriptor whose value selects a tenant's
	// tier and overrides.
	TenantDescriptor string
	// DefaultTier applies to tenants without an entry; "" for none.
	DefaultTier string

	keys keyIndex // what ParamsForKey reads: keyparams.go

	digest    [32]byte
	names     []string       // descriptor names some limit uses, sorted
	index     map[string]int // name -> position in names
	byName    map[string]*Limit
	tenantIdx int                 // position of TenantDescriptor in names, or -1
	base      profile             // for tenants without entry
	tenants   map[string]profile  // tenants with an entry
	tiers     map[string]profile  // by tier name
	domains   map[string][]*Limit // Envoy RLS domain -> its limits, see envoy.go
	leases    bool                // some limit has lease terms
}

// Limit is one limit of a Policy. Callers must not modify it.
type Limit struct {
	// Name is unique within the policy and matches [A-Za-z0-9_.-]{1,64}.
	Name string
	// Match lists the descriptors that must all be present for the limit to
	// apply; their values, in this order, make the key.
	Match []string
	// Group is the descriptor (one of Match) whose value is the key's hash
	// tag and selects the owner node.
	Group string
	// Rate and Burst are the limit's own numbers, before tiers and overrides.
	Rate  Rate
	Burst int64
	// Params is Rate and Burst as a GCRA limit.
	Params gcra.Limit
	// Shadow limits are decided and reported as would-deny but never deny.
	Shadow      bool
	Consistency Consistency
	OnFailure   FailureMode
	// Fallback is the local limit used when OnFailure is FailLocal and the
	// policy gives fallback_rate; zero otherwise.
	Fallback gcra.Limit
	// SharedFallback is true when OnFailure is FailLocal without a
	// fallback_rate: each node then falls back to its share of the
	// tenant's effective limit, rate/N and burst/N rounded up, N being the
	// members the node sees at the time (see SharedLimit).
	SharedFallback bool
	// Lease, when set, lets peer nodes decide the limit's hot keys from
	// batches of units its owner grants them (package lease). Only fast
	// limits have it.
	Lease *lease.Terms
	Scope Scope
	// Envoy holds the limit's Envoy RLS settings (see envoy.go); its
	// Domain is "" for limits that answer weir's own API.
	Envoy EnvoyLimit
	// Kind is what the limit counts (concurrency.go). A KindConcurrency
	// limit has no Rate and Burst: its Params are its permit bound,
	// Burst MaxInFlight and Interval TTL in nanoseconds
	// (decide.PermitLimit); it is fast, regional, never leased, and its
	// OnFailure is closed or open. "" (a literal Limit) reads as KindRate.
	Kind Kind
	// MaxInFlight and TTL are a concurrency limit's own permit bound and
	// permit life, before tiers and overrides; zero on a rate limit.
	MaxInFlight int64
	TTL         time.Duration
	// ReserveTTL is how long a reservation on a rate limit may be settled
	// (reserve_ttl, else decide.DefaultReserveTTL; a strict limit keeps
	// the default but takes no reservations); zero on a concurrency limit.
	ReserveTTL time.Duration

	match    []int       // Match as positions in Policy.names
	def      *decide.Def // see Def
	groupPos int         // position of Group in Match
}

// effective is one limit's numbers for one tenant after tier and overrides.
type effective struct {
	params gcra.Limit
	shadow bool
}

// profile holds one effective entry per limit, indexed like Policy.Limits.
type profile []effective

// Match is one limit that applies to a request.
type Match struct {
	Limit *Limit
	// Key is the limit's storage key, see Resolve.
	Key string
	// GroupValue is the raw (unescaped) value of the limit's group
	// descriptor: what routes the request to an owner.
	GroupValue string
	// Params and Shadow are the limit's after the tenant's tier and
	// overrides; use them, not Limit.Params and Limit.Shadow.
	Params gcra.Limit
	Shadow bool
}

// Descriptors returns every descriptor name some limit uses, sorted. The
// slice is the caller's.
func (p *Policy) Descriptors() []string { return slices.Clone(p.names) }

// Limit returns the limit called name, or nil.
func (p *Policy) Limit(name string) *Limit { return p.byName[name] }

// Tier returns the rate-limit numbers the named tier gives limit, and false
// if either does not exist. Intended for inspection and tests.
func (p *Policy) Tier(tier, limit string) (params gcra.Limit, shadow bool, ok bool) {
	return lookup(p, p.tiers[tier], limit)
}

// Tenant returns the numbers tenant gets for limit after its tier and
// overrides (or the default tier), and false if the limit does not exist.
func (p *Policy) Tenant(tenant, limit string) (params gcra.Limit, shadow bool, ok bool) {
	prof, found := p.tenants[tenant]
	if !found {
		prof = p.base
	}
	return lookup(p, prof, limit)
}

func lookup(p *Policy, prof profile, limit string) (gcra.Limit, bool, bool) {
	l := p.byName[limit]
	if l == nil || prof == nil {
		return gcra.Limit{}, false, false
	}
	e := prof[slices.Index(p.Limits, l)]
	return e.params, e.shadow, true
}

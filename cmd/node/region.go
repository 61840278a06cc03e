package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/limitkey"
	"github.com/weirhq/weir/owner"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/region"
	"github.com/weirhq/weir/regionlink"
)

// regions is the part of the configuration that shares scope: global
// limits with other regions (docs/regions.md). With no --region-peers the
// node enforces every limit whole, as a single region.
type regions struct {
	peersFlag      string
	RegionPeers    map[string]string // region -> node-to-node address of a node there
	RegionFloor    float64
	RegionInterval time.Duration
	RegionTTL      time.Duration
}

// flags defines the region flags on fs; str and dur take their defaults
// from WEIR_* variables, and apply sets a flag of another kind from its
// variable.
func (r *regions) flags(fs *flag.FlagSet, str func(*string, string, string, string), dur func(*time.Duration, string, time.Duration, string), apply func(string)) {
	def := region.DefaultConfig()
	str(&r.peersFlag, "region-peers", "", "the other regions sharing scope: global limits, as name=host:port,... (the --peer-addr of any node there, mutual TLS); needs --region; empty enforces global limits whole")
	fs.Float64Var(&r.RegionFloor, "region-floor", def.Floor.Fraction(), "share of every global limit each region holds without asking (and keeps when cut off), a fraction; regions × floor must not exceed 1")
	apply("region-floor")
	dur(&r.RegionInterval, "region-interval", def.Interval, "how often a node reports its demand on global keys to their home regions")
	dur(&r.RegionTTL, "region-ttl", def.TTL, "how long a region's share lasts without renewal (a cut-off region falls to its floor after it); must exceed --region-interval")
}

// parse reads --region-peers. It returns an error for an entry that is not
// name=address, or a region named twice.
func (r *regions) parse() error {
	r.RegionPeers = nil
	for _, entry := range splitList(r.peersFlag) {
		name, addr, ok := strings.Cut(entry, "=")
		name, addr = strings.TrimSpace(name), strings.TrimSpace(addr)
		if !ok || name == "" || addr == "" {
			return fmt.Errorf("--region-peers entry %q: want region=host:port", entry)
		}
		if _, dup := r.RegionPeers[name]; dup {
			return fmt.Errorf("--region-peers names region %q twice", name)
		}
		if r.RegionPeers == nil {
			r.RegionPeers = map[string]string{}
		}
		r.RegionPeers[name] = addr
	}
	return nil
}

// linkConfig returns the regionlink configuration of a node called node in
// region own, and false when no peers are set (global limits enforced
// whole). The error names the flag at fault.
func (r regions) linkConfig(own, node string) (regionlink.Config, bool, error) {
	if len(r.RegionPeers) == 0 {
		return regionlink.Config{}, false, nil
	}
	if own == "" {
		return regionlink.Config{}, false, errors.New("--region-peers needs --region: name this node's region")
	}
	if n := len(r.RegionPeers) + 1; math.IsNaN(r.RegionFloor) || r.RegionFloor < 0 || r.RegionFloor*float64(n) > 1 {
		return regionlink.Config{}, false, fmt.Errorf("--region-floor %v: want at least 0 and at most 1/%d (%d regions each hold a floor)", r.RegionFloor, n, n)
	}
	cfg := regionlink.DefaultConfig(own, node, r.RegionPeers)
	cfg.Shares.Floor = region.Share(math.Floor(r.RegionFloor * float64(region.Whole)))
	cfg.Shares.Interval, cfg.Shares.TTL = r.RegionInterval, r.RegionTTL
	cfg.CallTimeout = r.RegionInterval / 2
	if err := cfg.Validate(); err != nil {
		return regionlink.Config{}, false, fmt.Errorf("--region-*: %w", err)
	}
	return cfg, true, nil
}

// policyCheck is the policy.WatcherConfig.Check of a node sharing global
// limits: a policy with a global limit that admits nothing under the
// region flags is refused (at start, and on reload, when the previous one
// keeps serving), one that admits only in some regions at a time is
// accepted with a warning (policy.Policy.RegionWarnings). Nil without
// regions, or with region flags linkConfig refuses (it says why).
func (r regions) policyCheck(own, node string) func(*policy.Policy) ([]string, error) {
	lcfg, on, err := r.linkConfig(own, node)
	if err != nil || !on {
		return nil
	}
	return func(p *policy.Policy) ([]string, error) {
		w, err := p.RegionWarnings(lcfg.Shares)
		if err != nil {
			return nil, fmt.Errorf("with --region-peers (%d regions) and --region-floor %v: %w", len(lcfg.Shares.Regions), r.RegionFloor, err)
		}
		return w, nil
	}
}

// openRegions builds the region link when --region-peers is set, sending
// its reports with the node's peer client and routing them through routes
// (built before it: no late binding).
func (n *node) openRegions(cfg config, routes regionlink.Owners, policies limiter.PolicySource, peers *peer.Client, reg prometheus.Registerer) error {
	lcfg, on, err := cfg.regions.linkConfig(cfg.Region, cfg.NodeName)
	if err != nil || !on {
		return err
	}
	n.regional.link, err = regionlink.New(lcfg, regionlink.Deps{Owners: routes, Sender: peers, LimitName: limitName, Burst: globalBurst(policies), Group: limitkey.Group}, n.logger, reg)
	if err != nil {
		return err
	}
	n.logger.Info("sharing global limits between regions", "region", cfg.Region, "peers", lcfg.Peers,
		"floor", lcfg.Shares.Floor.Fraction(), "interval", lcfg.Shares.Interval, "ttl", lcfg.Shares.TTL)
	return nil
}

// limitName is regionlink.Deps.LimitName: the limit-name field of a key
// (limitkey.LimitName), "" for a key of another shape. Only metrics and
// the grants a home counts call it; decisions carry their limits'
// identities.
func limitName(key string) string {
	name, _ := limitkey.LimitName(key)
	return name
}

// globalBurst is regionlink.Deps.Burst over policies' current policy: the
// burst of the limit that built a key (0 when no limit did). The home
// calls it for the keys other regions report, off the decision path.
func globalBurst(policies limiter.PolicySource) func(key string) int64 {
	return func(key string) int64 {
		if l := policies.Current().LimitOfKey(key); l != nil {
			return l.Burst
		}
		return 0
	}
}

// regionsDep is what the owner enforces global limits with: nil (not a
// nil *Link in an interface) without regions.
func (n *node) regionsDep() owner.Regions {
	if n.regional.link == nil {
		return nil
	}
	return n.regional.link
}

// regionFallback is the limiter option that keeps failure-policy fallbacks
// of global limits within the region's guaranteed part (its floor, or its
// fixed strict part; regionlink.Link.Guaranteed), split over the region's
// nodes, so that every region falling back at once stays within the limit.
// Without regions it changes nothing.
func regionFallback(link *regionlink.Link) limiter.Option {
	if link == nil {
		return func(*limiter.Limiter) {}
	}
	return limiter.WithFallbackPart(func(l *policy.Limit, whole gcra.Limit) (gcra.Limit, bool) {
		if l.Scope != policy.ScopeGlobal {
			return whole, true
		}
		return link.Guaranteed(whole, l.Consistency == policy.ConsistencyStrict)
	})
}

// ringChanged tells the region link that ownership moved.
func (n *node) ringChanged() {
	if n.regional.link != nil {
		n.regional.link.RingChanged()
	}
}

var _ owner.Regions = (*regionlink.Link)(nil)

// regionWiring is the node's region link (nil without --region-peers).
type regionWiring struct {
	link *regionlink.Link
}

package regionlink

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/weirhq/weir/region"
)

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("regionlink: invalid config")

// Config tunes a Link.
type Config struct {
	// Region is this node's region.
	Region string
	// Node is this node's name in its cluster; with the boot time it
	// names the node's reports (region.Report.Reporter).
	Node string
	// Peers maps every other region to the node-to-node address
	// (--peer-addr, host:port or DNS name) of any node in it: that node
	// answers for the keys it owns and forwards the rest inside its region.
	Peers map[string]string
	// Shares is the rebalancing settings (floor, interval, TTL, grace,
	// damping); every region must run the same. Its Regions must be
	// Region and the keys of Peers.
	Shares region.Config
	// CallTimeout bounds one report round trip, forwards inside the home
	// region included. At most Shares.Interval, so a round ends before the
	// next one starts; a report that times out only means no grant this
	// round.
	CallTimeout time.Duration
	// MaxItems bounds the keys of one report this node accepts (a larger
	// one is refused whole); MaxKeyBytes bounds one key, and the region and
	// reporter names.
	MaxItems    int
	MaxKeyBytes int
}

// DefaultConfig returns the settings for a node of region that reaches the
// other regions at peers: region.DefaultConfig's rebalancing, reports that
// give up after half an interval, at most 65,536 keys per report of at
// most 16 KiB each. It copies peers.
func DefaultConfig(regionName, node string, peers map[string]string) Config {
	names := append(slices.Collect(maps.Keys(peers)), regionName)
	slices.Sort(names)
	shares := region.DefaultConfig(names...)
	return Config{Region: regionName, Node: node, Peers: maps.Clone(peers), Shares: shares,
		CallTimeout: shares.Interval / 2, MaxItems: 1 << 16, MaxKeyBytes: 16 << 10}
}

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error {
	var errs []error
	if c.Region == "" {
		errs = append(errs, errors.New("region name is required"))
	}
	if c.Node == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if len(c.Peers) == 0 {
		errs = append(errs, errors.New("at least one peer region is required"))
	}
	for name, addr := range c.Peers {
		switch {
		case name == c.Region:
			errs = append(errs, fmt.Errorf("peer region %q is this node's own region", name))
		case addr == "":
			errs = append(errs, fmt.Errorf("peer region %q has no address", name))
		}
	}
	want := append(slices.Collect(maps.Keys(c.Peers)), c.Region)
	slices.Sort(want)
	got := slices.Sorted(slices.Values(c.Shares.Regions))
	if !slices.Equal(got, want) {
		errs = append(errs, fmt.Errorf("shares name regions %v, want this region and its peers %v", got, want))
	}
	if err := c.Shares.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.CallTimeout <= 0 || c.CallTimeout > c.Shares.Interval {
		errs = append(errs, fmt.Errorf("call timeout %s must be in (0, interval %s]", c.CallTimeout, c.Shares.Interval))
	}
	if c.MaxItems <= 0 || c.MaxKeyBytes <= 0 {
		errs = append(errs, fmt.Errorf("max items %d and max key bytes %d must be positive", c.MaxItems, c.MaxKeyBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/region"
)

const policyUsage = `Usage: weir policy check [--nodes N] [--regions N [--region-floor F]] FILE
       weir policy import-envoy CONFIG.yaml... > policy.yaml

Validates the policy file FILE as a node would load it. Prints its version
and limits, each with what it does when its owner or Redis cannot decide,
and a warning line for every limit that fails open (admits without bound
during such a fault); exits 0. Prints the problem and exits 1 if the file
is invalid. With leases, it also warns about every limit marked lease: that
is too small to lease in a cluster of N nodes (default 3): such a limit is
decided at its owner, without leases. With --regions N (the number of
regions sharing its scope: global limits, as the nodes' --region-peers
plus their own; --region-floor as theirs, default 0.02), it exits 1 for a
global limit that can admit nothing in those regions (a strict one whose
burst is below N) and warns about one whose burst is below N, which admits
in at most that many regions at a time and not at all in a region cut off
from the key's home (docs/regions.md, "Small bursts").

import-envoy converts envoyproxy/ratelimit configuration files into a weir
policy (see "weir policy import-envoy -h").
`

func runPolicy(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && isHelp(args[0]) || len(args) == 2 && args[0] == "check" && isHelp(args[1]) {
		fmt.Fprint(stdout, policyUsage)
		return exitOK
	}
	if len(args) > 0 && args[0] == "import-envoy" {
		return runImportEnvoy(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintf(stderr, "weir policy: want the subcommand check\n\n%s", policyUsage)
		return exitError
	}
	fs := flag.NewFlagSet("weir policy check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	nodes := fs.Int("nodes", 3, "cluster size the lease checks assume")
	regions := fs.Int("regions", 0, "regions sharing global limits (0: no region checks)")
	floor := fs.Float64("region-floor", region.DefaultConfig().Floor.Fraction(), "the nodes' --region-floor")
	if err := fs.Parse(args[1:]); err != nil || *nodes < 1 {
		fmt.Fprintf(stderr, "weir policy check: --nodes wants a cluster size of at least 1 (%v)\n\n%s", err, policyUsage)
		return exitError
	}
	rcfg, err := regionConfig(*regions, *floor)
	if err != nil {
		fmt.Fprintf(stderr, "weir policy check: %v\n\n%s", err, policyUsage)
		return exitError
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "weir policy check: want exactly one FILE, got %d arguments\n\n%s", fs.NArg(), policyUsage)
		return exitError
	}
	p, err := policy.LoadFile(fs.Arg(0))
	var regionWarnings []string
	if err == nil && rcfg != nil {
		regionWarnings, err = p.RegionWarnings(*rcfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "weir policy check: %v\n", err)
		return exitNo
	}
	io.WriteString(stdout, formatPolicy(p))
	for _, w := range append(p.LeaseWarnings(*nodes), regionWarnings...) {
		fmt.Fprintf(stdout, "warning: %s\n", w)
	}
	return exitOK
}

// regionConfig is the region settings of --regions and --region-floor,
// nil for no regions.
func regionConfig(n int, floor float64) (*region.Config, error) {
	if n == 0 {
		return nil, nil
	}
	if n < 0 || math.IsNaN(floor) || floor < 0 || floor*float64(n) > 1 {
		return nil, fmt.Errorf("--regions %d --region-floor %v: want at least 1 region and a floor of at least 0 and at most 1/%d", n, floor, max(n, 1))
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("r%d", i+1)
	}
	cfg := region.DefaultConfig(names...)
	cfg.Floor = region.Share(math.Floor(floor * float64(region.Whole)))
	return &cfg, nil
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// formatPolicy prints a summary line, one line per limit and a warning
// line per limit that fails open.
func formatPolicy(p *policy.Policy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ok: version %s, %d limits\n", p.Version, len(p.Limits))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	var open []string
	for _, l := range p.Limits {
		mode := "enforced"
		if l.Shadow {
			mode = "shadow"
		}
		line := fmt.Sprintf("  %s\t%s\tburst %d\t%s\t%s\t%s", l.Name, l.Rate.String(), l.Burst, mode, l.Consistency, onFailure(l))
		if l.Envoy.Unlimited {
			line = fmt.Sprintf("  %s\tunlimited\t\t%s\t\t", l.Name, mode)
		}
		if l.Kind == policy.KindConcurrency {
			line = fmt.Sprintf("  %s\tmax_in_flight %d\tttl %s\t%s\t%s\t%s", l.Name, l.MaxInFlight, l.TTL, mode, l.Consistency, onFailure(l))
		}
		if l.Envoy.Domain != "" {
			line += "\tenvoy domain " + l.Envoy.Domain
		}
		if l.Lease != nil {
			line += fmt.Sprintf("\tleased (max %d, ttl %s)", l.Lease.Max, l.Lease.TTL)
		}
		fmt.Fprintln(tw, line)
		if l.OnFailure == policy.FailOpen && !l.Envoy.Unlimited {
			open = append(open, l.Name)
		}
	}
	tw.Flush()
	for _, name := range open {
		fmt.Fprintf(&b, "warning: limit %q fails open: while its owner or Redis cannot decide, it admits every request, without bound\n", name)
	}
	return b.String()
}

// onFailure describes a limit's failure policy in a few words.
func onFailure(l *policy.Limit) string {
	if l.OnFailure != policy.FailLocal {
		return "on failure: " + string(l.OnFailure)
	}
	s := fmt.Sprintf("on failure: local, %s burst %d", fallbackRate(l.Fallback.Interval), l.Fallback.Burst)
	if l.SharedFallback {
		s = "on failure: local, this node's share (rate/N, burst/N)"
	}
	if l.Scope == policy.ScopeGlobal {
		// A node sharing the limit with other regions caps the fallback at
		// its part of its region's floor (docs/regions.md §6.9).
		s += ", at most this node's share of its region's floor with regions"
	}
	return s
}

// fallbackRate writes an emission interval in nanoseconds as a rate.
func fallbackRate(interval int64) string {
	if interval <= 0 {
		return "?"
	}
	if perSec := int64(time.Second) / interval; perSec >= 1 && int64(time.Second)%interval == 0 {
		return fmt.Sprintf("%d/s", perSec)
	}
	return fmt.Sprintf("1 per %s", time.Duration(interval))
}

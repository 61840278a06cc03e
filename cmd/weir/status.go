package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/ring"
)

// ringSamples is how many synthetic groups estimate each member's share of
// the ring.
const ringSamples = 100_000

// statusView is what weir status prints.
type statusView struct {
	Nodes []admin.Status `json:"nodes"`
	// RingShare is each member's estimated share of groups, from the
	// members the first answering node sees, on the ring the nodes build
	// (ring.DefaultConfig).
	RingShare map[string]float64 `json:"ring_share"`
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", "status [--addr HOST:PORT,...] [--json]", stderr)
	var a adminFlags
	a.register(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	addrs, err := a.list()
	if err != nil {
		return usageError(fs, stderr, err)
	}
	answers, ok := ask[admin.Status](ctx, "status", &a, addrs, admin.StatusPath, nil, stderr)
	if !ok {
		return exitError
	}
	var v statusView
	for _, ans := range answers {
		v.Nodes = append(v.Nodes, ans.Value)
	}
	if v.RingShare, err = ringShare(v.Nodes[0].Members); err != nil {
		fmt.Fprintf(stderr, "weir status: %v\n", err)
	}
	if a.asJSON {
		printJSON(stdout, v)
		return exitOK
	}
	printStatus(stdout, v)
	return exitOK
}

// ringShare estimates each member's share of groups by placing
// ringSamples synthetic groups on a ring of members.
func ringShare(members []string) (map[string]float64, error) {
	r, err := ring.New(ring.DefaultConfig(), members...)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for i := range ringSamples {
		if owner, ok := r.Owner(fmt.Sprintf("group-%d", i)); ok {
			counts[owner]++
		}
	}
	share := map[string]float64{}
	for m, c := range counts {
		share[m] = float64(c) / ringSamples
	}
	return share, nil
}

func printStatus(w io.Writer, v statusView) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPOLICY\tMEMBERS\tRING SHARE\tBREAKERS NOT CLOSED\tDECISIONS\tFALLBACKS\tWRITE-BEHIND LAG\tKEYS")
	versions := map[string]bool{}
	for _, s := range v.Nodes {
		versions[s.PolicyVersion] = true
		var bad []string
		for _, name := range slices.Sorted(maps.Keys(s.Breakers)) {
			if st := s.Breakers[name]; st != "closed" {
				bad = append(bad, name+"="+st)
			}
		}
		breakers := strings.Join(bad, ",")
		if breakers == "" {
			breakers = "-"
		}
		f := s.Figures
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f%%\t%s\t%.0f\t%.0f\t%.2fs\t%.0f\n", s.Node, s.PolicyVersion, len(s.Members),
			100*v.RingShare[s.Node], breakers, f["weir_decisions_total"], f["weir_fallback_decisions_total"],
			f["weir_writebehind_lag_seconds"], f["weir_active_keys"])
	}
	tw.Flush()
	if len(versions) > 1 {
		fmt.Fprintf(w, "warning: the nodes run %d different policy versions\n", len(versions))
	}
	var other []string
	for _, s := range v.Nodes {
		for _, k := range slices.Sorted(maps.Keys(s.Figures)) {
			if strings.HasPrefix(k, "weir_lease_") || strings.HasPrefix(k, "weir_region_") {
				other = append(other, fmt.Sprintf("%s %s=%g", s.Node, k, s.Figures[k]))
			}
		}
	}
	if len(other) > 0 {
		fmt.Fprintln(w, "leases and regions:\n  "+strings.Join(other, "\n  "))
	}
}

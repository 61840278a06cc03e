package main

import (
	"fmt"
	"strings"
)

// The systems issue 24's targets compare, by their names in systems().
const (
	weirOne       = "weir, 1 node, embedded"
	weirThree     = "weir, 3 nodes, Redis"
	weirRouted    = "weir, 3 nodes, Redis, routed"
	weirLone      = "weir, 3 lone nodes, no cluster"
	ratelimitName = "envoyproxy/ratelimit, Redis"
)

// target is one of issue 24's targets: a figure computed round by round
// from the runs, and the bound it must keep.
type target struct {
	what  string
	bound string
	ok    func(float64) bool
	// values returns the figure for every round, or nil when a system it
	// needs was not run.
	values func(rs *runs) []float64
}

func atLeast(x float64) func(float64) bool { return func(v float64) bool { return v >= x } }
func atMost(x float64) func(float64) bool  { return func(v float64) bool { return v <= x } }

func cpuUS(r result) float64 { return r.cpuPerDecision().Seconds() * 1e6 }

// quotient returns f(a's runs) / f(b's runs) round by round for workload w.
func quotient(a, b, w string, f func(result) float64) func(*runs) []float64 {
	return func(rs *runs) []float64 {
		ra, rb := rs.by[[2]string{a, w}], rs.by[[2]string{b, w}]
		if len(ra) == 0 || len(rb) == 0 {
			return nil
		}
		return ratios(ra, rb, f)
	}
}

// targets are issue 24's, in its order.
var targets = []target{
	{"3 nodes (plain client) ÷ 1 node, decisions/s, spread", "≥ 0.6", atLeast(0.6), quotient(weirThree, weirOne, spread.name, result.rate)},
	{"3 nodes (plain client) ÷ envoyproxy/ratelimit, decisions/s, spread", "≥ 1.5", atLeast(1.5), quotient(weirThree, ratelimitName, spread.name, result.rate)},
	{"3 nodes (plain client) ÷ envoyproxy/ratelimit, server CPU/decision, spread", "≤ 0.5", atMost(0.5), quotient(weirThree, ratelimitName, spread.name, cpuUS)},
	{"3 nodes (plain client) ÷ envoyproxy/ratelimit, server CPU/decision, paced", "≤ 1", atMost(1), quotient(weirThree, ratelimitName, pacedLoad.name, cpuUS)},
	{"3 nodes (plain client), Redis commands/decision, spread", "≤ 0.02", atMost(0.02), redisOf(weirThree, spread.name)},
	{"leasable hot key: slowest non-owner ÷ owner, decisions/s", "≥ 0.85", atLeast(0.85), slowestNonOwner(weirThree)},
	{"3 nodes (routed client) ÷ 1 node, decisions/s, spread", "(for comparison)", nil, quotient(weirRouted, weirOne, spread.name, result.rate)},
	{"3 lone nodes (no forwarding, no Redis) ÷ 1 node, decisions/s, spread", "(for comparison)", nil, quotient(weirLone, weirOne, spread.name, result.rate)},
	{"3 lone nodes ÷ envoyproxy/ratelimit, server CPU/decision, spread", "(for comparison)", nil, quotient(weirLone, ratelimitName, spread.name, cpuUS)},
}

func redisOf(sys, w string) func(*runs) []float64 {
	return func(rs *runs) []float64 {
		r := rs.by[[2]string{sys, w}]
		if len(r) == 0 {
			return nil
		}
		return figures(r, func(x result) float64 { p, _ := x.redisPerDecision(); return p })
	}
}

// slowestNonOwner is, round by round, the lowest non-owner's decisions/s
// over the owner's on the leasable hot key.
func slowestNonOwner(sys string) func(*runs) []float64 {
	return func(rs *runs) []float64 {
		owner := rs.by[[2]string{sys, leasedRow(0)}]
		if len(owner) == 0 {
			return nil
		}
		var out []float64
		for k := 1; ; k++ {
			r := rs.by[[2]string{sys, leasedRow(k)}]
			if len(r) == 0 {
				return out
			}
			q := ratios(r, owner, result.rate)
			if out == nil {
				out = q
				continue
			}
			for i := range min(len(out), len(q)) {
				out[i] = min(out[i], q[i])
			}
		}
	}
}

// targetTable renders every target whose systems ran: its median over the
// rounds, each round, and whether the median keeps the bound.
func (rs *runs) targetTable(b *strings.Builder) {
	header := false
	for _, t := range targets {
		v := t.values(rs)
		if len(v) == 0 {
			continue
		}
		if !header {
			header = true
			b.WriteString("\nIssue 24's targets, from the rows above (each round's ratio of the two systems' runs in that round):\n\n")
			b.WriteString("| figure | target | median | each round | met (median) |\n|---|---|--:|--:|---|\n")
		}
		met := "—"
		if t.ok != nil {
			met = "no"
			if t.ok(median(v)) {
				met = "yes"
			}
		}
		fmt.Fprintf(b, "| %s | %s | %.3g | %s | %s |\n", t.what, t.bound, median(v), joinFloats(v, "%.3g"), met)
	}
}

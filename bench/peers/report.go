package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// runs collects every run's result by system and workload.
type runs struct {
	by map[[2]string][]result
}

func (rs *runs) add(system, workload string, r result) {
	if rs.by == nil {
		rs.by = make(map[[2]string][]result)
	}
	k := [2]string{system, workload}
	rs.by[k] = append(rs.by[k], r)
}

// line is one run's figures for the progress output; the bound is shown
// for a one-key workload only (it is per key).
func (r result) line() string {
	s := fmt.Sprintf("%8.0f/s  p50 %-9v p99 %-9v errors %d  admitted %d",
		r.rate(), round(r.quantile(0.5)), round(r.quantile(0.99)), r.errors, r.admitted)
	if r.late > 0 {
		s += fmt.Sprintf("  late %d", r.late)
	}
	if r.metered {
		s += fmt.Sprintf("  server CPU %v (%v/decision)", r.use.cpu, round(r.cpuPerDecision()))
		if per, ok := r.redisPerDecision(); ok {
			s += fmt.Sprintf("  Redis %d commands (%.3f/decision: %s)", total(r.use.cmds), per, topCounts(r.use.cmds, 3))
		}
	}
	if r.oneKey {
		s += fmt.Sprintf("  of bound %.0f; in 1s at most %d of bound %.0f", r.bound(), r.maxAdmittedIn(time.Second), r.limit.boundIn(time.Second))
	}
	if r.node != "" {
		s += "  via " + r.node
	}
	return s
}

func round(d time.Duration) time.Duration {
	if d >= time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs must not be empty.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func figures(rs []result, f func(result) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// table renders the medians as the markdown that goes into the doc: the
// closed-loop table, the paced one, the leasable hot key per node, and
// issue 24's ratios round by round.
func (rs *runs) table(sys []system, cfg config, started time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s; runs per row: %d (the median, every run in brackets); %d closed-loop workers over %d gRPC connections per node, %s measured after %s of warm-up, GOMAXPROCS %d on %d CPUs.\n\n",
		started.Format("2006-01-02 15:04 UTC"), cfg.runs, cfg.load.workers, cfg.conns,
		cfg.load.duration, cfg.load.warmup, runtime.GOMAXPROCS(0), runtime.NumCPU())
	rs.closedTable(&b, sys)
	rs.pacedTable(&b, sys, cfg.pace)
	rs.leasedTable(&b, sys)
	rs.targetTable(&b)
	return b.String()
}

func (rs *runs) closedTable(b *strings.Builder, sys []system) {
	fmt.Fprintf(b, "| system | workload | decisions/s | p50 | p99 | server CPU/decision | Redis commands/decision | admitted / bound B + W/T over the run | most admitted in 1 s / bound %.0f | errors |\n", benchLimit.boundIn(time.Second))
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range sys {
		for _, w := range closedLoads {
			r := rs.by[[2]string{s.name, w.name}]
			if len(r) == 0 {
				continue
			}
			admitted, inSecond := "—", "—"
			if w.keys == 1 {
				admitted, inSecond = boundCells(r)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f |\n",
				s.name, w.name, rateCell(r), quantileCell(r, 0.5), quantileCell(r, 0.99),
				cpuCell(r), redisCell(r), admitted, inSecond, medianOf(r, func(x result) float64 { return float64(x.errors) }))
		}
	}
}

func (rs *runs) pacedTable(b *strings.Builder, sys []system, p pacing) {
	if !slices.ContainsFunc(sys, func(s system) bool { return len(rs.by[[2]string{s.name, pacedLoad.name}]) > 0 }) {
		return
	}
	fmt.Fprintf(b, "\nPaced (open loop): %.0f decisions/s in total on schedule, whatever the answers, at most %d outstanding; late = sent more than %v behind its slot, or dropped when the measured time was up.\n\n", p.rate, p.inFlight, lateAfter)
	b.WriteString("| system | workload | achieved decisions/s | p50 | p99 | server CPU/decision | Redis commands/decision | late | errors |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range sys {
		r := rs.by[[2]string{s.name, pacedLoad.name}]
		if len(r) == 0 {
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %.0f | %.0f |\n",
			s.name, pacedLoad.name, rateCell(r), quantileCell(r, 0.5), quantileCell(r, 0.99), cpuCell(r), redisCell(r),
			medianOf(r, func(x result) float64 { return float64(x.late) }), medianOf(r, func(x result) float64 { return float64(x.errors) }))
	}
}

func (rs *runs) leasedTable(b *strings.Builder, sys []system) {
	header := false
	for _, s := range sys {
		owner := rs.by[[2]string{s.name, leasedRow(0)}]
		if len(owner) == 0 {
			continue
		}
		if !header {
			header = true
			fmt.Fprintf(b, "\nLeasable hot key (weir only): one key of %d/s, burst %d, `lease: {max: %d, ttl: %s}`; all workers on one node at a time.\n\n",
				leasedLimit.perSecond, leasedLimit.burst, leasedMax, leasedTTL)
			fmt.Fprintf(b, "| system | driven through | node | decisions/s | × the owner | p50 | p99 | server CPU/decision | Redis commands/decision | admitted / bound B + W/T over the run | most admitted in 1 s / bound %.0f | errors |\n", leasedLimit.boundIn(time.Second))
			b.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		}
		for k := 0; ; k++ {
			r := rs.by[[2]string{s.name, leasedRow(k)}]
			if len(r) == 0 {
				break
			}
			ratio := "1"
			if k > 0 {
				ratio = ratioCell(r, owner)
			}
			admitted, inSecond := boundCells(r)
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f |\n",
				s.name, strings.TrimPrefix(leasedRow(k), leasedLoad.name+" via "), nodesCell(r), rateCell(r), ratio,
				quantileCell(r, 0.5), quantileCell(r, 0.99), cpuCell(r), redisCell(r), admitted, inSecond,
				medianOf(r, func(x result) float64 { return float64(x.errors) }))
		}
	}
}

// medianOf is the median of f over rs.
func medianOf(rs []result, f func(result) float64) float64 { return median(figures(rs, f)) }

// rateCell is "median (run, run...)" of decisions per second.
func rateCell(rs []result) string {
	rates := figures(rs, result.rate)
	return fmt.Sprintf("%.0f (%s)", median(rates), joinFloats(rates, "%.0f"))
}

func quantileCell(rs []result, q float64) string {
	return fmt.Sprint(round(time.Duration(medianOf(rs, func(x result) float64 { return float64(x.quantile(q)) }))))
}

// cpuCell is the servers' CPU per decision in µs, median and runs.
func cpuCell(rs []result) string {
	if !rs[0].metered {
		return "—"
	}
	us := figures(rs, func(x result) float64 { return float64(x.cpuPerDecision()) / float64(time.Microsecond) })
	return fmt.Sprintf("%.0f µs (%s)", median(us), joinFloats(us, "%.0f"))
}

// redisCell is Redis commands per decision, median and runs; "—" for a
// system without Redis.
func redisCell(rs []result) string {
	if _, ok := rs[0].redisPerDecision(); !ok {
		return "—"
	}
	per := figures(rs, func(x result) float64 { p, _ := x.redisPerDecision(); return p })
	return fmt.Sprintf("%.3f (%s)", median(per), joinFloats(per, "%.3f"))
}

// boundCells are the one-key columns: admitted against B + W/T over the
// run, and the most admitted in any 1 s.
func boundCells(rs []result) (admitted, inSecond string) {
	most := figures(rs, func(x result) float64 { return float64(x.maxAdmittedIn(time.Second)) })
	adm := figures(rs, func(x result) float64 { return float64(x.admitted) })
	admitted = fmt.Sprintf("%.0f / %.0f (%s)", median(adm), median(figures(rs, result.bound)), joinFloats(adm, "%.0f"))
	return admitted, fmt.Sprintf("%.0f (%s)", median(most), joinFloats(most, "%.0f"))
}

// ratioCell is rs's rate over base's, run by run (rounds align: every
// round runs every row), median and runs.
func ratioCell(rs, base []result) string {
	ratios := ratios(rs, base, result.rate)
	return fmt.Sprintf("%.2f (%s)", median(ratios), joinFloats(ratios, "%.2f"))
}

// ratios is f(rs[i]) / f(base[i]) for every round both have.
func ratios(rs, base []result, f func(result) float64) []float64 {
	n := min(len(rs), len(base))
	out := make([]float64, n)
	for i := range n {
		if d := f(base[i]); d != 0 {
			out[i] = f(rs[i]) / d
		}
	}
	return out
}

// nodesCell names the nodes a row's runs went through ("n1" when all did).
func nodesCell(rs []result) string {
	var names []string
	for _, r := range rs {
		if !slices.Contains(names, r.node) {
			names = append(names, r.node)
		}
	}
	return strings.Join(names, ", ")
}

func joinFloats(xs []float64, format string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, ", ")
}

// The doc's section between these lines is what replaceSection rewrites.
const (
	beginMarker = "<!-- bench-peers:begin (written by make bench-peers) -->"
	endMarker   = "<!-- bench-peers:end -->"
)

// errNoMarkers is returned when the doc has no section to replace.
var errNoMarkers = errors.New("peers: the doc has no " + beginMarker + " ... " + endMarker + " section")

// replaceSection rewrites the text between the markers in the file at path
// with table. The file is left unchanged if the markers are missing.
func replaceSection(path, table string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("peers: %w", err)
	}
	updated, err := spliceSection(old, table)
	if err != nil {
		return fmt.Errorf("%w: %s", err, path)
	}
	return os.WriteFile(path, updated, 0o644)
}

// spliceSection returns doc with the text between the markers replaced by
// table, the markers kept.
func spliceSection(doc []byte, table string) ([]byte, error) {
	i := bytes.Index(doc, []byte(beginMarker))
	j := bytes.Index(doc, []byte(endMarker))
	if i < 0 || j < i {
		return nil, errNoMarkers
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(beginMarker)])
	out.WriteString("\n" + table)
	out.Write(doc[j:])
	return out.Bytes(), nil
}

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
func (r result) line(w workload) string {
	s := fmt.Sprintf("%8.0f/s  p50 %-9v p99 %-9v errors %d  admitted %d",
		r.rate(), round(r.quantile(0.5)), round(r.quantile(0.99)), r.errors, r.admitted)
	if w.keys == 1 {
		s += fmt.Sprintf(" of bound %.0f; in 1s at most %d of bound %.0f", r.bound(), r.maxAdmittedIn(time.Second), boundIn(time.Second))
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

// table renders the medians as the markdown that goes into the doc.
func (rs *runs) table(sys []system, cfg config, started time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s; runs per row: %d (the median, every run in brackets); %d closed-loop workers over %d gRPC connections per node, %s measured after %s of warm-up, GOMAXPROCS %d on %d CPUs.\n\n",
		started.Format("2006-01-02 15:04 UTC"), cfg.runs, cfg.load.workers, cfg.conns,
		cfg.load.duration, cfg.load.warmup, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Fprintf(&b, "| system | workload | decisions/s | p50 | p99 | admitted / bound B + W/T over the run | most admitted in 1 s / bound %.0f | errors |\n", boundIn(time.Second))
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range sys {
		for _, w := range allLoad {
			r := rs.by[[2]string{s.name, w.name}]
			if len(r) == 0 {
				continue
			}
			rates := figures(r, result.rate)
			p50 := median(figures(r, func(x result) float64 { return float64(x.quantile(0.5)) }))
			p99 := median(figures(r, func(x result) float64 { return float64(x.quantile(0.99)) }))
			admitted, inSecond := "—", "—"
			if w.keys == 1 {
				most := figures(r, func(x result) float64 { return float64(x.maxAdmittedIn(time.Second)) })
				inSecond = fmt.Sprintf("%.0f (%s)", median(most), joinFloats(most, "%.0f"))
				admitted = fmt.Sprintf("%.0f / %.0f (%s)",
					median(figures(r, func(x result) float64 { return float64(x.admitted) })),
					median(figures(r, result.bound)),
					joinFloats(figures(r, func(x result) float64 { return float64(x.admitted) }), "%.0f"))
			}
			errs := median(figures(r, func(x result) float64 { return float64(x.errors) }))
			fmt.Fprintf(&b, "| %s | %s | %.0f (%s) | %v | %v | %s | %s | %.0f |\n",
				s.name, w.name, median(rates), joinFloats(rates, "%.0f"),
				round(time.Duration(p50)), round(time.Duration(p99)), admitted, inSecond, errs)
		}
	}
	return b.String()
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

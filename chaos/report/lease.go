package report

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/weirhq/weir/chaos/checker"
)

// leaseTable writes one row per leasable limit of each result: what the
// limit admitted against its bound, and what the nodes' lease counters say
// leasing did. Nothing when no result has a leasable limit.
func leaseTable(bw *bufio.Writer, results []checker.Result) {
	found := false
	for _, r := range results {
		found = found || len(r.Leases) > 0
	}
	if !found {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p("Leasable limits (held to B + W/T like every other limit; stranded units were never admitted):\n\n")
	p("| scenario | limit | admitted | worst window per width: admitted / bound | from leases | hit ratio at peers | stranded at peers | expired at owners | held at the end | granted / credited |\n")
	p("|---|---|--:|---|--:|--:|--:|--:|--:|---|\n")
	for _, r := range results {
		for _, l := range r.Leases {
			p("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", cell(r.Scenario), cell(l.Limit), l.Admitted,
				cell(widthsCell(r, l.Limit)), leaseCell(l, fmt.Sprintf("%d (%.0f%%)", l.Counts.Spent, 100*l.FromLeases())),
				leaseCell(l, fmt.Sprintf("%.0f%%", 100*l.HitRatio())), leaseCell(l, fmt.Sprint(l.Stranded())),
				leaseCell(l, fmt.Sprint(l.Counts.Expired)), leaseCell(l, fmt.Sprint(l.Counts.Held())),
				leaseCell(l, fmt.Sprintf("%d / %d", l.Counts.Granted, l.Counts.Credited)))
		}
	}
	p("\n")
}

// leaseCell is s, or "n/a" when the run recorded no lease counters.
func leaseCell(l checker.LeaseResult, s string) string {
	if !l.Read {
		return "n/a"
	}
	return s
}

// widthsCell is "1s 19/20, 5s 68/70": per window width, the admitted units
// (fallback included) of limit's worst window against B + W/T.
func widthsCell(r checker.Result, limit string) string {
	for _, l := range r.Limits {
		if l.Spec.Name != limit {
			continue
		}
		var parts []string
		for _, w := range l.WorstByWidth {
			if w.Key == "" {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %d/%s", w.Width, w.Admitted+w.Fallback, checker.Units(w.Bound)))
		}
		return strings.Join(parts, ", ")
	}
	return ""
}

// leaseLines writes, per leasable limit of r, the nodes' lease counters in
// full and how they were read.
func leaseLines(bw *bufio.Writer, r checker.Result) {
	for _, l := range r.Leases {
		if !l.Read {
			fmt.Fprintf(bw, "Leases of %s: no lease counters were recorded (the run stopped early).\n\n", inline(l.Limit))
			continue
		}
		c := l.Counts
		fmt.Fprintf(bw, "Leases of %s: at owners granted %d, credited %d, expired %d; at peers received %d, spent %d, returned %d, stranded %d, lost %d; decisions at peers %d spent, %d refused, %d forwarded (%s).\n\n",
			inline(l.Limit), c.Granted, c.Credited, c.Expired, c.Received, c.Spent, c.Returned, c.Stranded, c.Lost,
			c.SpentDecisions, c.RefusedDecisions, c.ForwardedDecisions, oneLine(l.Detail))
	}
}

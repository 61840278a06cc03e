package report

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/weirhq/weir/chaos/checker"
	"github.com/weirhq/weir/chaos/history"
)

// maxStateRows caps the state-survival checks listed one by one per
// scenario; failed checks are always listed first.
const maxStateRows = 20

// Markdown writes a report over results: a summary table with one row per
// scenario, then per scenario its faults, its limits, its violations and
// its state-survival checks.
func Markdown(w io.Writer, results []checker.Result) error {
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }

	pass := 0
	for _, r := range results {
		if r.OK() {
			pass++
		}
	}
	p("# weir chaos report\n\n")
	p("%d of %d scenarios passed.\n\n", pass, len(results))
	p("| scenario | ops | admitted / bound (worst window) | worst excess | fallback decisions | availability healthy / fault / recovery | p99 healthy / fault / recovery | longest without a normal answer | verdict |\n")
	p("|---|--:|---|--:|---|---|---|---|---|\n")
	for _, r := range results {
		p("| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n",
			cell(r.Scenario), r.Ops, cell(worstCell(r)), excessCell(r), cell(fallbackCell(r.Fallback)),
			perPhase(r, availability), perPhase(r, p99), cell(gapCell(r.Gap)), verdict(r.OK()))
	}
	p("\n")
	leaseTable(bw, results)
	for _, r := range results {
		scenario(bw, r)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	out := append(bytes.TrimRight(buf.Bytes(), "\n"), '\n')
	_, err := w.Write(out)
	return err
}

// scenario writes the details of one result.
func scenario(bw *bufio.Writer, r checker.Result) {
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p("## %s: %s\n\n", inline(r.Scenario), verdict(r.OK()))

	if len(r.Faults) == 0 {
		p("No faults.\n\n")
	} else {
		p("Faults:\n\n")
		for _, f := range r.Faults {
			p("- %s\n", faultLine(r, f))
		}
		p("\n")
	}

	if len(r.Limits) > 0 {
		p("| limit | T / B | consistency | on failure | admitted | worst window | admitted / allowance | excess | fallback admitted | result |\n")
		p("|---|---|---|---|--:|---|---|--:|---|---|\n")
		for _, l := range r.Limits {
			p("| %s | %s / %d | %s | %s | %d | %s | %s | %s | %s | %s |\n",
				cell(l.Spec.Name), l.Spec.Interval, l.Spec.Burst, cell(l.Spec.Consistency), cell(onFailure(l.Spec)),
				l.Admitted, cell(windowCell(r, l.Worst)), allowanceCell(l.Worst), excess(l.Worst),
				cell(fallbackAdmitted(l)), verdict(l.Pass))
		}
		p("\n")
	}

	for _, l := range r.Limits {
		if pr := l.Permits; pr != nil {
			p("Permits of %s (at most %d live, ttl %s): %d granted, %d released, %d renewed, %d never released; most surely held at once %d (key %s at %.3fs); %d instants over the bound, %d denials judged, %d refused with a slot free.\n\n",
				inline(l.Spec.Name), l.Spec.MaxInFlight, l.Spec.PermitTTL, pr.Granted, pr.Released, pr.Renewed, pr.Crashed,
				pr.MaxHeld, inline(pr.MaxHeldKey), float64(pr.MaxHeldAt-r.Start)/1e9, pr.Overheld, pr.Judged, pr.Starved)
		}
	}
	leaseLines(bw, r)
	list(bw, "Errors", r.Errors)
	if len(r.Violations) == 0 {
		p("No violations.\n\n")
	}
	list(bw, "Violations", r.Violations)
	stateSummary(bw, r)
	list(bw, "Notes", r.Notes)
}

// onFailure names a limit's failure policy, "local (default share)" for
// the default.
func onFailure(l history.LimitSpec) string {
	s := l.OnFailure
	switch {
	case l.FallbackShare && l.Default:
		s += " (default: share per member)"
	case l.FallbackShare:
		s += " (share per member)"
	case l.OnFailure == "local":
		s += fmt.Sprintf(" (%s, burst %d per node)", l.FallbackInterval, l.FallbackBurst)
	}
	return s
}

// list writes a titled bullet list; nothing when items is empty.
func list(bw *bufio.Writer, title string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(bw, "%s:\n\n", title)
	for _, it := range items {
		fmt.Fprintf(bw, "- %s\n", oneLine(it))
	}
	fmt.Fprintf(bw, "\n")
}

// stateSummary writes the state-survival checks of r.
func stateSummary(bw *bufio.Writer, r checker.Result) {
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	st := r.State
	switch {
	case len(st.Checks) == 0 && len(st.Skipped) == 0:
		p("State survival: no crash or freeze, nothing to check.\n\n")
		return
	case len(st.Checks) == 0:
		p("State survival: no key was saturated at a crash or freeze.\n\n")
	default:
		p("State survival: %d checks, %d failed.\n\n", len(st.Checks), st.Failed)
		checks := append([]checker.StateCheck(nil), st.Checks...)
		sort.SliceStable(checks, func(i, j int) bool { return !checks[i].Pass && checks[j].Pass })
		p("| limit | key | fault | edge | at | admitted / allowed | result |\n")
		p("|---|---|---|---|--:|---|---|\n")
		for i, c := range checks {
			if i == maxStateRows {
				p("\n%d more checks not listed.\n\n", len(checks)-maxStateRows)
				break
			}
			p("| %s | %s | %s | %s | %.1fs | %d / %s in %s | %s |\n", cell(c.Limit), cell(c.Key), cell(c.Fault),
				c.Edge, seconds(c.At, r.Start), c.Admitted, checker.Units(c.Allowed), c.Width, verdict(c.Pass))
		}
		if len(checks) <= maxStateRows {
			p("\n")
		}
	}
	if len(st.Skipped) > 0 {
		p("Not checked for state survival:\n\n")
		for _, s := range st.Skipped {
			p("- %s\n", oneLine(s))
		}
		p("\n")
	}
}

func faultLine(r checker.Result, f checker.Fault) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", inline(f.Name))
	if len(f.Nodes) > 0 {
		fmt.Fprintf(&b, " on %s", oneLine(strings.Join(f.Nodes, ", ")))
	}
	end := fmt.Sprintf("%.1fs", seconds(f.End, r.Start))
	if !f.Ended {
		end = "end (never healed)"
	}
	fmt.Fprintf(&b, ": %.1fs to %s", seconds(f.Start, r.Start), end)
	if f.Owners > 1 {
		fmt.Fprintf(&b, ", up to %d owners", f.Owners)
	}
	if f.Crash {
		b.WriteString(", crash")
	}
	return b.String()
}

// worstCell is "admitted / bound (width, limit)" of the worst window of
// the run.
func worstCell(r checker.Result) string {
	l, ok := r.Worst()
	if !ok {
		return "-"
	}
	w := l.Worst
	return fmt.Sprintf("%d / %s (%s, %s)", w.Admitted+w.Fallback, checker.Units(w.Bound), w.Width, l.Spec.Name)
}

func excessCell(r checker.Result) string {
	l, ok := r.Worst()
	if !ok {
		return "-"
	}
	return excess(l.Worst)
}

func excess(w checker.Window) string {
	if w.Key == "" {
		return "-"
	}
	if w.Excess > 0 {
		return "+" + checker.Units(w.Excess)
	}
	return checker.Units(w.Excess)
}

// windowCell describes where a limit's worst window was.
func windowCell(r checker.Result, w checker.Window) string {
	if w.Key == "" {
		return "-"
	}
	return fmt.Sprintf("%s at %.1fs, %s", w.Key, seconds(w.Start, r.Start), w.Width)
}

func allowanceCell(w checker.Window) string {
	if w.Key == "" {
		return "-"
	}
	s := fmt.Sprintf("%d / %s", w.Admitted, checker.Units(w.Allowance))
	var terms []string
	if w.Owners > 1 {
		terms = append(terms, fmt.Sprintf("×%d owners", w.Owners))
	}
	if w.Crashes > 0 {
		terms = append(terms, fmt.Sprintf("+%d crash", w.Crashes))
	}
	if len(terms) > 0 {
		s += " (" + strings.Join(terms, ", ") + ")"
	}
	switch {
	case len(w.FallbackTerms) > 0:
		// Judged together: normal + fallback against both terms.
		s = fmt.Sprintf("%d + %d fallback / %s + %s (%s)", w.Admitted, w.Fallback, checker.Units(w.Allowance),
			checker.Units(w.FallbackAllowance), termsCell(w.FallbackTerms))
		if len(terms) > 0 {
			s += " (" + strings.Join(terms, ", ") + ")"
		}
	case w.Fallback > 0 && w.FallbackUnbounded:
		s += fmt.Sprintf("; fallback %d, not bounded", w.Fallback)
	case w.Fallback > 0:
		s += fmt.Sprintf("; fallback %d / 0", w.Fallback)
	}
	return s
}

// termsCell lists fallback terms as "n1 174 (N=3), n2 174 (N=3)".
func termsCell(terms []checker.FallbackTerm) string {
	parts := make([]string, len(terms))
	for i, t := range terms {
		parts[i] = fmt.Sprintf("%s %s", t.Node, checker.Units(t.Units))
		if t.Members > 0 {
			parts[i] += fmt.Sprintf(" (N=%d)", t.Members)
		}
	}
	return strings.Join(parts, ", ")
}

// gapCell is "2.1s (hot k)", or "-" when every key was answered normally.
func gapCell(g checker.Gap) string {
	if g.Key == "" {
		return "-"
	}
	return fmt.Sprintf("%s (%s %s)", duration(g.Length), g.Limit, g.Key)
}

// fallbackCell is "local 120 (adm 40), closed 12".
func fallbackCell(fb map[string]checker.FallbackStats) string {
	var parts []string
	for _, mode := range slices.Sorted(maps.Keys(fb)) {
		st := fb[mode]
		if st.Decisions == 0 {
			continue
		}
		s := fmt.Sprintf("%s %d", mode, st.Decisions)
		if st.Allowed > 0 {
			s += fmt.Sprintf(" (adm %d)", st.Allowed)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func fallbackAdmitted(l checker.LimitResult) string {
	var parts []string
	for _, mode := range slices.Sorted(maps.Keys(l.FallbackAdmitted)) {
		if n := l.FallbackAdmitted[mode]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", mode, n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// perPhase joins f over the phases, "-" for a phase without operations.
func perPhase(r checker.Result, f func(checker.PhaseStats) string) string {
	parts := make([]string, 0, len(checker.Phases))
	for _, ph := range checker.Phases {
		st := r.Phase(ph)
		s := "-"
		if st.Ops > 0 {
			s = f(st)
			if !st.Pass {
				s = "**" + s + "**"
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " / ")
}

func availability(st checker.PhaseStats) string {
	return fmt.Sprintf("%.2f%%", 100*st.Availability)
}

func p99(st checker.PhaseStats) string {
	if st.Allowed+st.Denied == 0 {
		return "n/a"
	}
	return duration(st.P99)
}

// duration rounds d for a table: µs below a millisecond, ms below a second.
func duration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return trimZero(fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))) + "ms"
	}
	return trimZero(fmt.Sprintf("%.2f", d.Seconds())) + "s"
}

func trimZero(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	return s
}

func verdict(ok bool) string {
	if ok {
		return "**PASS**"
	}
	return "**FAIL**"
}

func seconds(t, start int64) float64 { return float64(t-start) / 1e9 }

// cell makes s safe inside a table cell.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(oneLine(s), "|", `\|`)
}

// escaper keeps text from being read as Markdown emphasis, code or HTML.
var escaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;")

// oneLine keeps s on one line of Markdown, as plain text.
func oneLine(s string) string {
	return escaper.Replace(strings.Join(strings.Fields(s), " "))
}

// inline is s for a heading or list item: on one line, or "(unnamed)".
func inline(s string) string {
	if s = oneLine(s); s == "" {
		return "(unnamed)"
	}
	return s
}

// Package report renders chaos-suite results for people: Markdown writes
// one summary table over every scenario's checker.Result followed by each
// scenario's details (its limits' worst windows, its violations and its
// state-survival checks), and Plot draws one scenario's admissions against
// the bound over time, with the faults shaded, as a PNG.
package report

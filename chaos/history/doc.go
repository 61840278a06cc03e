// Package history is the record a chaos run leaves behind: one header that
// names the scenario and the limits it enforced, every client operation with
// its invoke and complete times and its outcome, and every fault the nemesis
// started and healed. It is written as JSON lines while the run goes on (so a
// run killed half-way still leaves a readable prefix) and read back whole by
// the checker and the report.
//
// Times are Unix nanoseconds from the wall clock of the one machine every
// process of a run shares, so a client's records and the nemesis's events
// can be compared directly.
package history

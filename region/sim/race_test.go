//go:build race

package sim_test

// raceEnabled shortens the property test under the race detector, which
// makes it about ten times slower and adds nothing to a single-threaded
// simulation but the check that it stays single-threaded.
const raceEnabled = true

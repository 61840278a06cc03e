//go:build race

package lease

// raceEnabled shortens the property tests under the race detector, which
// makes them about ten times slower and adds nothing to a single-threaded
// simulation but the check that it stays single-threaded.
const raceEnabled = true

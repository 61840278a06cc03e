//go:build race

package checker

// raceSlowdown widens time budgets under the race detector.
const raceSlowdown = 10

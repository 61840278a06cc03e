// Package sim is a deterministic simulator for package region: it runs the
// real Member and Home of N regions sharing one global key on a virtual
// clock (1ms steps of a nanosecond time base, as in package region; no
// sockets, no goroutines), with message delays, jitter, loss, link and
// region outages, and drifting clocks, and enforces the key in every region
// with gcra.Decide at the region's current share.
//
// A Trace describes a run; Run returns its figures (efficiency, overshoot
// over the global bound, convergence after a demand shift, and the largest
// Σ of shares in use, in flight and reserved), and Plot draws shares
// against demand. Standard returns the traces docs/regions.md reports.
//
//	r, err := sim.Run(sim.Standard()[0])
//	fmt.Printf("%.2f%% efficient, %v units over the bound\n", 100*r.Efficiency, r.Overshoot)
//
// The same trace always gives the same result (randomness comes from
// Trace.Seed). The command regionsim prints the standard table and writes
// the plots: go run ./region/sim/regionsim -plot docs/img.
package sim

// Command regionsim runs the region simulator's standard traces, prints
// their figures as a Markdown table and, with -plot, writes a PNG of
// shares against demand per trace into a directory.
//
//	go run ./region/sim/regionsim -plot docs/img
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weirhq/weir/region/sim"
)

func main() {
	plotDir := flag.String("plot", "", "directory to write region-<trace>.png into (none if empty)")
	damping := flag.Float64("damping", 0, "override the damping of every trace (0 keeps the default)")
	interval := flag.Duration("interval", 0, "override the report interval of every trace (0 keeps the default)")
	flag.Parse()
	if err := run(os.Stdout, *plotDir, *damping, *interval); err != nil {
		fmt.Fprintln(os.Stderr, "regionsim:", err)
		os.Exit(1)
	}
}

func run(out *os.File, plotDir string, damping float64, interval time.Duration) error {
	fmt.Fprintln(out, "| trace | regions | efficiency | overshoot (units) | convergence | max Σ shares in use |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|")
	for _, tr := range sim.Standard() {
		if damping > 0 {
			tr.Config.Damping = damping
		}
		if interval > 0 {
			tr.Config.Interval = interval
		}
		r, err := sim.Run(tr)
		if err != nil {
			return err
		}
		conv := "—"
		if tr.Shift > 0 {
			conv = "never"
			if r.Converged {
				conv = r.Convergence.String()
			}
		}
		fmt.Fprintf(out, "| %s | %d | %.2f %% | %.0f | %s | %.4f |\n", tr.Name, len(tr.Config.Regions),
			100*r.Efficiency, r.Overshoot, conv, r.MaxInUse.Fraction())
		if plotDir != "" {
			if err := sim.Plot(filepath.Join(plotDir, "region-"+tr.Name+".png"), tr, r); err != nil {
				return err
			}
		}
	}
	return nil
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	repo      string // weir's repository root, where ./cmd/node is
	bin       string // where the servers are built
	doc       string // markdown file whose bench-peers section is rewritten; empty: none
	only      string // comma-separated substrings of system names; empty: all
	runs      int
	conns     int // gRPC connections per node
	skipBuild bool
	baseNode  string // a weir node binary to measure beside this tree's; "" for none
	load      loadConfig
	pace      pacing
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func parseConfig(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.StringVar(&c.repo, "repo", "../..", "weir repository root")
	fs.StringVar(&c.bin, "bin", "bin", "directory for the built servers")
	fs.StringVar(&c.doc, "doc", "", "markdown file whose bench-peers section (between its markers) is replaced by the table")
	fs.StringVar(&c.only, "only", "", "run only systems whose name contains one of these comma-separated words")
	fs.IntVar(&c.runs, "runs", 2, "runs of every system and workload (the table shows medians)")
	fs.IntVar(&c.conns, "conns", 2, "gRPC connections per node")
	fs.BoolVar(&c.skipBuild, "skip-build", false, "use the binaries already in -bin")
	fs.StringVar(&c.baseNode, "base-node", "", "also run the weir systems with this node binary (rows named \"(base)\"), to compare a change with its base in one run")
	fs.IntVar(&c.load.workers, "workers", 16, "closed-loop workers, spread over every node")
	fs.DurationVar(&c.load.duration, "duration", 5*time.Second, "measured time per run")
	fs.DurationVar(&c.load.warmup, "warmup", time.Second, "load before measuring")
	fs.DurationVar(&c.load.timeout, "timeout", time.Second, "per-decision deadline")
	fs.Float64Var(&c.pace.rate, "paced-rate", 2000, "decisions per second of the paced (open-loop) workload, all workers together")
	fs.IntVar(&c.pace.inFlight, "paced-inflight", 256, "most paced decisions outstanding at once")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("peers: unexpected arguments %q", fs.Args())
	case c.runs < 1, c.conns < 1, c.load.workers < 1, c.pace.inFlight < 1:
		return c, errors.New("peers: -runs, -conns, -workers and -paced-inflight must be at least 1")
	case !(c.pace.rate > 0 && c.pace.rate <= 1e6):
		return c, errors.New("peers: -paced-rate must be in (0, 1e6]")
	case c.load.duration <= 0, c.load.warmup < 0, c.load.timeout <= 0:
		return c, errors.New("peers: -duration and -timeout must be positive, -warmup not negative")
	}
	return c, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg, err := parseConfig(args)
	if err != nil {
		return err
	}
	sys := selectSystems(systems(cfg.baseNode != ""), cfg.only)
	if len(sys) == 0 {
		return fmt.Errorf("peers: -only %q matches no system", cfg.only)
	}
	bins, err := build(ctx, cfg)
	if err != nil {
		return err
	}
	started := time.Now().UTC()
	var rs runs
	// Round by round, every system in turn, so that the machine's slow
	// spells spread over all systems rather than landing on one.
	for round := 1; round <= cfg.runs; round++ {
		for _, s := range sys {
			got, err := measure(ctx, cfg, s, bins)
			if err != nil {
				return fmt.Errorf("peers: %s, round %d: %w", s.name, round, err)
			}
			for _, m := range got {
				fmt.Fprintf(out, "round %d  %-30s %-38s %s\n", round, s.name, m.workload, m.r.line())
				rs.add(s.name, m.workload, m.r)
			}
		}
	}
	table := rs.table(sys, cfg, started)
	fmt.Fprintln(out)
	fmt.Fprint(out, table)
	if cfg.doc == "" {
		return nil
	}
	return replaceSection(cfg.doc, table)
}

func selectSystems(all []system, only string) []system {
	if only == "" {
		return all
	}
	words := strings.Split(only, ",")
	return slices.DeleteFunc(all, func(s system) bool {
		return !slices.ContainsFunc(words, func(w string) bool { return w != "" && strings.Contains(s.name, w) })
	})
}

// build compiles weir's node from the repository and each peer from its
// own module under build/ (one go.mod each: built together, ratelimit's
// newer OpenTelemetry breaks gubernator at start). build/gubernator is
// gubernator's daemon in a main that names memberlist nodes (see there).
func build(ctx context.Context, cfg config) (binaries, error) {
	bin, err := filepath.Abs(cfg.bin)
	if err != nil {
		return binaries{}, err
	}
	b := binaries{
		node:       filepath.Join(bin, "weir-node"),
		gubernator: filepath.Join(bin, "gubernator"),
		ratelimit:  filepath.Join(bin, "ratelimit"),
		base:       cfg.baseNode,
	}
	if cfg.skipBuild {
		return b, nil
	}
	steps := []struct{ dir, out, pkg string }{
		{cfg.repo, b.node, "./cmd/node"},
		{"build/gubernator", b.gubernator, "."},
		{"build/ratelimit", b.ratelimit, "github.com/envoyproxy/ratelimit/src/service_cmd"},
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", s.out, s.pkg)
		cmd.Dir = s.dir
		if msg, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("peers: go build %s: %w\n%s", s.pkg, err, msg)
		}
	}
	return b, nil
}

// measured is one run of one workload (or, for the leased hot key, of
// one node's row).
type measured struct {
	workload string
	r        result
}

// measure starts s, runs every workload once against it and stops it.
func measure(ctx context.Context, cfg config, s system, bins binaries) ([]measured, error) {
	dir, err := os.MkdirTemp("", "weir-bench-peers-")
	if err != nil {
		return nil, err
	}
	ps := &procs{dir: dir}
	defer ps.stopAll()
	out, err := measureStarted(ctx, cfg, s, ps, bins)
	if err != nil {
		return nil, fmt.Errorf("%w (logs kept in %s)", err, dir)
	}
	return out, os.RemoveAll(dir)
}

// measureStarted runs the closed-loop workloads, the paced one and, for a
// system with leased set, the leasable hot key through each node, each
// metered over its own measured window.
func measureStarted(ctx context.Context, cfg config, s system, ps *procs, bins binaries) ([]measured, error) {
	st, err := s.start(ctx, ps, bins)
	if err != nil {
		return nil, err
	}
	newMeter := func() *meter { return &meter{pids: ps.pids(), redis: st.redis} }
	ds, closeAll, err := s.dial(ctx, st, cfg)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	var out []measured
	for _, w := range closedLoads {
		m := newMeter()
		r := runLoad(ctx, cfg.load, w, ds, m)
		if err := settle(ctx, w, &r, m); err != nil {
			return nil, err
		}
		out = append(out, measured{w.name, r})
	}
	m := newMeter()
	r := runPaced(ctx, cfg.load, cfg.pace, pacedLoad, ds, m)
	if err := settle(ctx, pacedLoad, &r, m); err != nil {
		return nil, err
	}
	out = append(out, measured{pacedLoad.name, r})
	if s.leased {
		leased, err := measureLeased(ctx, cfg, st, newMeter)
		if err != nil {
			return nil, err
		}
		out = append(out, leased...)
	}
	return out, nil
}

// settle checks a finished run and attaches what its meter read.
func settle(ctx context.Context, w workload, r *result, m *meter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.decisions == 0 {
		return fmt.Errorf("%s: no decision answered (%d errors)", w.name, r.errors)
	}
	u, err := m.usage()
	if err != nil {
		return fmt.Errorf("%s: %w", w.name, err)
	}
	r.use, r.metered = u, true
	return nil
}

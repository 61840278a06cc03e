package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weirhq/weir/chaos/checker"
	"github.com/weirhq/weir/chaos/history"
	"github.com/weirhq/weir/chaos/netlab"
	"github.com/weirhq/weir/chaos/report"
	"github.com/weirhq/weir/chaos/workload"
)

// Scenario is one nemesis with its schedule.
type Scenario struct {
	Nemesis Nemesis
	// Healthy traffic before the fault, how long the fault lasts before it
	// is healed (0 for a nemesis that heals itself, like a rolling
	// restart), and how long traffic goes on once the cluster is whole.
	Healthy, Fault, Recovery time.Duration
	// Nodes, when not zero, replaces Options.Nodes.
	Nodes int
	// Regions, when not zero, splits the nodes into that many regions,
	// each its own cluster with its own redis-server, sharing global
	// limits (region.go).
	Regions int
	// RedisCluster runs a Redis Cluster of three masters with a replica
	// each instead of one redis-server (rediscluster.go).
	RedisCluster bool
	// Workload, when not nil, replaces the options' policy, classes and
	// victim group for this scenario.
	Workload *Workload
}

// Workload is a scenario's own policy and request mix.
type Workload struct {
	Policy      []byte
	Classes     []workload.Class
	VictimGroup string
	// Workers > 0 runs the workload closed loop (workload.Config.Workers)
	// for Duration, instead of open loop at Options.Rate until the
	// scenario ends.
	Workers  int
	Duration time.Duration
}

// Name is the nemesis's name.
func (s Scenario) Name() string { return s.Nemesis.Name }

func scenario(name string, fault time.Duration) Scenario {
	n, ok := NemesisByName(name)
	if !ok {
		panic("chaos: no nemesis " + name)
	}
	return Scenario{Nemesis: n, Healthy: 8 * time.Second, Fault: fault, Recovery: 8 * time.Second}
}

// ShortSuite is the suite CI runs: an owner killed and restarted, a
// minority partition, a Redis outage, and a shortened CPU starvation (4 s
// healthy, 8 s starved, 4 s recovery). About two minutes.
func ShortSuite() []Scenario {
	starve := scenario("cpu-starve", 8*time.Second)
	starve.Healthy, starve.Recovery = 4*time.Second, 4*time.Second
	return []Scenario{
		scenario("kill-owner", 12*time.Second),
		scenario("minority-partition", 12*time.Second),
		scenario("redis-outage", 10*time.Second),
		starve,
		ConcurrencySuite()[0],
	}
}

// FullSuite runs every nemesis, then the hot-key runs (HotKeySuite), the
// region cut (RegionSuite) and the Redis Cluster failover
// (RedisFailoverSuite).
func FullSuite() []Scenario {
	var out []Scenario
	for _, n := range Nemeses() {
		s := scenario(n.Name, 12*time.Second)
		switch n.Name {
		case "rolling-restart":
			s.Fault = 0
		case "scale-down-up":
			s.Nodes = 4
		}
		out = append(out, s)
	}
	out = append(append(out, HotKeySuite()...), RegionSuite()...)
	out = append(out, RedisFailoverSuite()...)
	out = append(out, ConcurrencySuite()...)
	return append(out, RLQSSuite()...)
}

// GraySuite is the slow-not-dead scenarios: CPU starvation, a throttled
// owner, rotating stalls, a throttled Redis, a flapping partition and a
// scale-down and up, then the hot-key runs.
func GraySuite() []Scenario {
	var out []Scenario
	for _, s := range FullSuite() {
		if !slices.ContainsFunc(classicNemeses(), func(n Nemesis) bool { return n.Name == s.Name() }) && s.Regions == 0 && !s.RedisCluster {
			out = append(out, s)
		}
	}
	return out
}

// Options configures Run.
type Options struct {
	// NodeBin is the cmd/node binary the nodes run.
	NodeBin string
	// ClientCmd runs the workload: it is given "-config FILE -out FILE",
	// must write the history of its operations to the out file, and must
	// stop cleanly on SIGTERM (cmd/weir-chaos client does).
	ClientCmd []string
	// Dir receives one directory per scenario (logs, histories, plot) and
	// report.md.
	Dir string
	// Nodes in the cluster (default 3).
	Nodes int
	// Rate of the workload in calls per second (default DefaultRate) and each
	// call's deadline (default 250ms).
	Rate     float64
	Deadline time.Duration
	Seed     uint64
	// Policy is the YAML every node enforces (default DefaultPolicy),
	// Classes the request mix (default DefaultClasses) and VictimGroup the
	// group whose owner a targeted nemesis hits (default
	// DefaultVictimGroup). Every limit a class names must be in Policy.
	Policy      []byte
	Classes     []workload.Class
	VictimGroup string
	Checker     checker.Config
	// Log receives progress lines (default: discarded).
	Log io.Writer

	regions      int  // Scenario.Regions
	redisCluster bool // Scenario.RedisCluster
}

func (o *Options) defaults() error {
	if o.NodeBin == "" || len(o.ClientCmd) == 0 || o.Dir == "" {
		return errors.New("chaos: NodeBin, ClientCmd and Dir are required")
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Deadline == 0 {
		o.Deadline = 250 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Policy == nil {
		o.Policy = []byte(DefaultPolicy)
	}
	if o.Classes == nil {
		o.Classes = DefaultClasses()
	}
	if o.VictimGroup == "" {
		o.VictimGroup = DefaultVictimGroup
	}
	if reflect.ValueOf(o.Checker).IsZero() {
		o.Checker = CheckerConfig()
	}
	return nil
}

// CheckerConfig is the checker's default configuration with the
// state-survival window widened to 10 s (a dead owner's keys are taken over
// only once gossip has declared it dead, about 5 s, and the check must see
// the new owner's first decisions). Its p99 ceiling is left at zero:
// runScenario sets it to the callers' deadline (see judgeLatency).
func CheckerConfig() checker.Config {
	c := checker.DefaultConfig()
	c.StateWindow = 10 * time.Second
	return c
}

// judgeLatency returns cfg with the p99 ceiling set to the workload's
// per-call deadline unless cfg sets a ceiling of its own. A forward may
// wait for a slow owner until the caller's deadline less a reserve
// (docs/architecture.md, "Slow is not dead"), so the promise to judge is
// that every caller is answered, by its owner or by a fallback, within its
// own deadline; the availability floors count the calls that were not.
func judgeLatency(cfg checker.Config, deadline time.Duration) checker.Config {
	if cfg.MaxP99 == 0 {
		cfg.MaxP99 = deadline
	}
	return cfg
}

// Outcome is what one scenario produced.
type Outcome struct {
	Scenario Scenario
	Dir      string
	Result   checker.Result
	Plot     string
	// Err is set when the scenario could not run to the end (the testbed
	// failed, a heal did not converge). Its verdict is then a failure.
	Err error
}

// OK reports whether the scenario ran and its history passed the checker.
func (o Outcome) OK() bool { return o.Err == nil && o.Result.OK() }

// Run runs the scenarios one after another, each on a fresh cluster, writes
// report.md into opts.Dir and returns the outcomes. It stops early, cleaning
// up, when ctx is done.
func Run(ctx context.Context, opts Options, scenarios []Scenario) ([]Outcome, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	// Bad input is refused before anything starts.
	for _, s := range scenarios {
		o := s.options(opts)
		if _, err := limitSpecs(o.Policy, o.Classes); err != nil {
			return nil, fmt.Errorf("scenario %s: %w", s.Name(), err)
		}
	}
	var outs []Outcome
	for _, s := range scenarios {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(opts.Log, "chaos: scenario %s\n", s.Name())
		o := runScenario(ctx, opts, s)
		if o.Err != nil {
			fmt.Fprintf(opts.Log, "chaos: %s: %v\n", s.Name(), o.Err)
		}
		outs = append(outs, o)
	}
	if err := writeReport(opts.Dir, outs); err != nil {
		return outs, err
	}
	return outs, ctx.Err()
}

// Results collects the checker results of outcomes; a scenario that could
// not run shows up with its error as a violation.
func Results(outs []Outcome) []checker.Result {
	var rs []checker.Result
	for _, o := range outs {
		r := o.Result
		r.Scenario = o.Scenario.Name()
		if o.Err != nil {
			r.Violations = append(r.Violations, "scenario did not complete: "+o.Err.Error())
		}
		rs = append(rs, r)
	}
	return rs
}

func writeReport(dir string, outs []Outcome) error {
	f, err := os.Create(filepath.Join(dir, "report.md"))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := report.Markdown(f, Results(outs)); err != nil {
		return err
	}
	return f.Close()
}

// options is opts as scenario s runs them.
func (s Scenario) options(opts Options) Options {
	if s.Nodes > 0 {
		opts.Nodes = s.Nodes
	}
	opts.regions = s.Regions
	opts.redisCluster = s.RedisCluster
	if w := s.Workload; w != nil {
		opts.Policy, opts.Classes = w.Policy, w.Classes
		if w.VictimGroup != "" {
			opts.VictimGroup = w.VictimGroup
		}
	}
	return opts
}

func runScenario(ctx context.Context, opts Options, s Scenario) (out Outcome) {
	opts = s.options(opts)
	out.Scenario = s
	out.Dir = filepath.Join(opts.Dir, s.Name())
	if err := os.MkdirAll(out.Dir, 0o755); err != nil {
		out.Err = err
		return out
	}
	logf := func(format string, args ...any) { fmt.Fprintf(opts.Log, format+"\n", args...) }
	evPath, opsPath := filepath.Join(out.Dir, "events.jsonl"), filepath.Join(out.Dir, "ops.jsonl")
	evFile, err := os.Create(evPath)
	if err != nil {
		out.Err = err
		return out
	}
	defer evFile.Close()
	events := history.NewWriter(evFile)

	out.Err = drive(ctx, opts, s, out.Dir, opsPath, events, logf)
	events.Flush()

	h, err := readHistory(evPath, opsPath)
	if err != nil {
		out.Err = errors.Join(out.Err, err)
		return out
	}
	cfg := opts.Checker
	if s.Nemesis.FaultAvailability > 0 {
		cfg.MinFaultAvailability = s.Nemesis.FaultAvailability
	}
	cfg = judgeLatency(cfg, opts.Deadline)
	out.Result = checker.Check(h, cfg)
	out.Plot = filepath.Join(out.Dir, "plot.png")
	if err := report.Plot(out.Plot, h, out.Result); err != nil {
		out.Err = errors.Join(out.Err, fmt.Errorf("plot: %w", err))
	}
	return out
}

// drive builds the testbed, runs the workload and the nemesis on schedule,
// and tears everything down.
func drive(ctx context.Context, opts Options, s Scenario, dir, opsPath string, events *history.Writer, logf func(string, ...any)) (err error) {
	limits, err := limitSpecs(opts.Policy, opts.Classes)
	if err != nil {
		return err
	}
	tb, err := newTestbed(ctx, dir, opts, events, logf)
	if err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	defer func() { err = errors.Join(err, tb.close()) }()

	if err := events.Header(history.Header{Scenario: s.Name(), Nodes: nodeNames(tb.nodes), Limits: limits,
		Deadline: opts.Deadline, Start: time.Now().UnixNano()}); err != nil {
		return err
	}
	stopWatch := tb.watchMembers(ctx)
	defer stopWatch()
	client, err := startClient(tb, opts, s.Workload, dir, opsPath)
	if err != nil {
		return err
	}
	stopClient := func() error {
		client.Signal(syscall.SIGTERM)
		select {
		case <-client.Done():
			return client.Wait()
		case <-time.After(15 * time.Second):
			client.Kill()
			return errors.New("workload client did not stop within 15s of SIGTERM")
		}
	}
	tb.event(history.Event{Kind: history.Info, Detail: "workload started"})
	if err := sleep(ctx, s.Healthy); err != nil {
		return errors.Join(err, stopClient())
	}
	err = fault(ctx, tb, s)
	if err == nil {
		err = sleep(ctx, s.Recovery)
	}
	tb.event(history.Event{Kind: history.Info, Detail: "workload stopping"})
	err = errors.Join(err, stopClient())
	if ctx.Err() == nil {
		tb.recordLeases(ctx)
	}
	return err
}

// fault runs the nemesis: start, hold, heal, each recorded.
func fault(ctx context.Context, tb *testbed, s Scenario) error {
	n := s.Nemesis
	tb.faultSeq++
	id := tb.faultSeq
	targets := n.targets(tb)
	// The event goes first, so that the fault window covers the whole act.
	tb.event(history.Event{Kind: history.FaultStart, ID: id, Fault: n.Name, Nodes: nodeNames(targets),
		Owners: n.Owners, Crash: n.Crash, Stale: n.Stale, Starved: n.Starved})
	heal, err := n.inject(ctx, tb, targets)
	if err == nil {
		err = sleep(ctx, s.Fault)
	}
	if heal != nil {
		// Heal even after an error or an interrupt, so the run ends whole.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), convergeLimit+10*time.Second)
		err = errors.Join(err, heal(hctx))
		cancel()
	}
	tb.event(history.Event{Kind: history.FaultEnd, ID: id, Fault: n.Name, Nodes: nodeNames(targets)})
	if err == nil {
		err = tb.waitConverged(ctx, convergeLimit)
		tb.event(history.Event{Kind: history.Info, Detail: "cluster converged"})
	}
	return err
}

// clientNice is the workload client's nice value (the nodes run at 0).
const clientNice = -10

// startClient runs the workload in the client's namespace.
func startClient(tb *testbed, opts Options, w *Workload, dir, opsPath string) (*netlab.Proc, error) {
	cfg := workload.Config{
		Classes:     opts.Classes,
		Rate:        opts.Rate,
		Duration:    24 * time.Hour, // until SIGTERM
		Deadline:    opts.Deadline,
		MaxInFlight: 2000,
		Seed:        opts.Seed,
	}
	if w != nil && w.Workers > 0 {
		cfg.Workers, cfg.Duration = w.Workers, w.Duration
	}
	for _, n := range tb.nodes {
		cfg.Targets = append(cfg.Targets, workload.Target{Name: n.Name, Addr: n.GRPCAddr()})
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "client.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return nil, err
	}
	// The callers are not on the machine under test in production; here
	// they are, and a client the hogs (or a busy machine) deschedule
	// records answers that reached it in time as late. It runs at a higher
	// priority than the nodes so that it measures weir, not its own stalls.
	args := append([]string{"-n", strconv.Itoa(clientNice), opts.ClientCmd[0]}, opts.ClientCmd[1:]...)
	args = append(args, "-config", cfgPath, "-out", opsPath)
	p, err := tb.client.Start(tb.client.Command("nice", args...), filepath.Join(dir, "client.log"))
	if err != nil {
		return nil, fmt.Errorf("start workload client (%s): %w", strings.Join(opts.ClientCmd, " "), err)
	}
	return p, nil
}

func readHistory(paths ...string) (*history.History, error) {
	var rs []io.Reader
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		rs = append(rs, f)
	}
	return history.Read(rs...)
}

// Command weir-chaos runs weir's chaos suite (package chaos) and is also its
// workload client.
//
//	weir-chaos run [-suite short|full|gray|hotkey] [-scenarios a,b] -node-bin PATH [-out DIR]
//	               [-policy FILE] [-workload FILE] [-victim GROUP] [-rate N] [-deadline D]
//	weir-chaos client -config FILE -out FILE
//
// run needs root, iproute2 and nftables. It prints the summary table and
// exits 1 when a scenario fails. client is what run starts inside the
// client's network namespace; it offers the workload described by the
// config file until SIGTERM and writes every operation to the out file.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/weirhq/weir/chaos"
	"github.com/weirhq/weir/chaos/history"
	"github.com/weirhq/weir/chaos/workload"
)

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runSuite(os.Args[2:])
	case "client":
		err = runClient(os.Args[2:])
	case "-h", "-help", "--help", "help":
		usage(os.Stdout)
		return
	default:
		fmt.Fprintf(os.Stderr, "weir-chaos: unknown command %q\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "weir-chaos:", err)
		if errors.Is(err, errFailed) {
			os.Exit(1)
		}
		os.Exit(2)
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage:
  weir-chaos run [-suite short|full|gray|hotkey] [-scenarios a,b] -node-bin PATH [-out DIR]
                 [-policy FILE] [-workload FILE] [-victim GROUP] [-rate N] [-deadline D]
  weir-chaos client -config FILE -out FILE`)
}

var errFailed = errors.New("a scenario failed")

func runSuite(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	suite := fs.String("suite", "full", "short (CI: owner kill, minority partition, Redis outage, CPU starvation), full (every scenario), "+
		"gray (the slow-not-dead scenarios) or hotkey (issue 10's hot-key runs: idle, CPU hogs, hogs and stalls)")
	only := fs.String("scenarios", "", "comma-separated nemesis names to run instead of a suite")
	nodeBin := fs.String("node-bin", "", "path to the cmd/node binary (required)")
	out := fs.String("out", "chaos-results", "directory for histories, logs, plots and report.md")
	rate := fs.Float64("rate", chaos.DefaultRate, "workload calls per second")
	deadline := fs.Duration("deadline", 250*time.Millisecond, "each call's deadline")
	policyPath := fs.String("policy", "", "policy YAML the nodes enforce (default: chaos.DefaultPolicy)")
	workloadPath := fs.String("workload", "", "JSON array of workload classes (default: chaos.DefaultClasses); every limit a class names must be in the policy")
	victim := fs.String("victim", chaos.DefaultVictimGroup, "group whose owner the targeted nemeses hit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := chaos.Options{Rate: *rate, Deadline: *deadline, VictimGroup: *victim, Log: os.Stderr}
	if *policyPath != "" {
		b, err := os.ReadFile(*policyPath)
		if err != nil {
			return err
		}
		opts.Policy = b
	}
	if *workloadPath != "" {
		b, err := os.ReadFile(*workloadPath)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &opts.Classes); err != nil {
			return fmt.Errorf("run: %s: %w", *workloadPath, err)
		}
		if len(opts.Classes) == 0 {
			return fmt.Errorf("run: %s names no workload classes", *workloadPath)
		}
	}
	if *nodeBin == "" {
		return errors.New("run: -node-bin is required (make chaos builds it)")
	}
	var scenarios []chaos.Scenario
	switch {
	case *only != "":
		all := map[string]chaos.Scenario{}
		for _, s := range chaos.FullSuite() {
			all[s.Name()] = s
		}
		for _, name := range strings.Split(*only, ",") {
			s, ok := all[strings.TrimSpace(name)]
			if !ok {
				return fmt.Errorf("run: unknown scenario %q", name)
			}
			scenarios = append(scenarios, s)
		}
	case *suite == "short":
		scenarios = chaos.ShortSuite()
	case *suite == "full":
		scenarios = chaos.FullSuite()
	case *suite == "gray":
		scenarios = chaos.GraySuite()
	case *suite == "hotkey":
		scenarios = chaos.HotKeySuite()
	default:
		return fmt.Errorf("run: -suite %q: want short, full, gray or hotkey", *suite)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bin, err := filepath.Abs(*nodeBin)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts.NodeBin, opts.ClientCmd, opts.Dir = bin, []string{self, "client"}, dir
	outs, err := chaos.Run(ctx, opts, scenarios)
	if report, rerr := os.ReadFile(filepath.Join(dir, "report.md")); rerr == nil {
		os.Stdout.Write(report)
	}
	if err != nil {
		return err
	}
	for _, o := range outs {
		if !o.OK() {
			return errFailed
		}
	}
	return nil
}

func runClient(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "workload config (JSON)")
	outPath := fs.String("out", "", "history file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cfgPath == "" || *outPath == "" {
		return errors.New("client: -config and -out are required")
	}
	b, err := os.ReadFile(*cfgPath)
	if err != nil {
		return err
	}
	var cfg workload.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("client: %s: %w", *cfgPath, err)
	}
	f, err := os.Create(*outPath)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := workload.Run(ctx, cfg, history.NewWriter(f))
	fmt.Fprintf(os.Stderr, "client: %d ops %v\n", st.Ops, st.Outcomes)
	if err != nil {
		return err
	}
	return f.Close()
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// config is everything the node is told at start.
type config struct {
	GRPCAddr        string
	HTTPAddr        string
	PolicyPath      string
	RedisTimeout    time.Duration
	SweepInterval   time.Duration
	ShutdownTimeout time.Duration
	LogFormat       string
	LogLevel        string
	Check           bool         // --check: validate, summarise and exit (check.go)
	Bounds          boundsConfig // resource bounds: bounds.go
	// GRPCStreamWorkers: goroutines serving each gRPC server's calls, 0
	// for one goroutine per call (streamworkers.go).
	GRPCStreamWorkers int

	// Cluster membership.
	NodeName       string
	GossipAddr     string
	AdvertiseAddr  string
	Join           []string
	Region         string
	ForwardTimeout time.Duration
	FreezeLimit    time.Duration

	security           // listener exposure and TLS: security.go
	redisFlags         // how to reach Redis: redisflags.go
	regions    regions // global limits shared with other regions: region.go
}

// parseConfig reads flags from args, with WEIR_* environment variables as
// defaults. getenv is os.Getenv outside tests.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	var join string
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := envFlags{fs: fs, getenv: getenv}
	str := func(p *string, name, def, usage string) {
		fs.StringVar(p, name, envOr(getenv, name, def), usage)
	}
	dur := func(p *time.Duration, name string, def time.Duration, usage string) {
		fs.DurationVar(p, name, def, usage)
		env.apply(name)
	}
	str(&c.GRPCAddr, "grpc-addr", "127.0.0.1:8081", "gRPC listen address")
	str(&c.HTTPAddr, "http-addr", "127.0.0.1:8080", "HTTP listen address (decide API, metrics, health)")
	str(&c.PolicyPath, "policy", "", "policy YAML file (default: the built-in example policy)")
	c.redisFlags.flags(fs, str, &env)
	dur(&c.RedisTimeout, "redis-timeout", 50*time.Millisecond, "ceiling on one Redis call")
	dur(&c.SweepInterval, "sweep-interval", 10*time.Second, "how often idle in-memory keys are freed")
	dur(&c.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight calls may take to finish on shutdown")
	str(&c.LogFormat, "log-format", "text", "log format: text or json")
	str(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	env.boolean(&c.Check, "check", false, "validate the flags, TLS files, gossip keys and policy, print a summary and exit without listening: 0 when the node would start, 1 with the error")
	checkBounds := addBoundsFlags(fs, &c.Bounds, getenv)
	addStreamWorkersFlag(fs, &env, &c.GRPCStreamWorkers)
	str(&c.NodeName, "node-name", host, "this node's name in the cluster (unique)")
	str(&c.GossipAddr, "gossip-addr", "", "memberlist bind IP:port (TCP and UDP); empty runs a cluster of one. Required with --join")
	str(&c.AdvertiseAddr, "advertise-addr", "", "IP:port other nodes gossip with this one on; its IP also replaces 0.0.0.0 or [::] of --peer-addr and --grpc-addr in the addresses given to other nodes and clients (default: --gossip-addr's IP, else the host's first private IP, else what its name resolves to)")
	str(&join, "join", "", "comma-separated seed host:port or DNS names, re-resolved on every attempt")
	str(&c.Region, "region", "", "this node's region, carried in membership metadata; with --region-peers, the region whose share of global limits this node enforces")
	dur(&c.ForwardTimeout, "forward-timeout", time.Second, "ceiling on one forward to a group's owner; a forward normally ends sooner, at the caller's deadline less a reserve (see docs/architecture.md, Slow is not dead)")
	dur(&c.FreezeLimit, "freeze-limit", time.Second, "a node unscheduled longer than this (SIGSTOP, VM pause) reloads its state from Redis before deciding again; keep it below gossip failure detection")
	c.security.flags(fs, str, env.boolean)
	c.regions.flags(fs, str, dur, env.apply)
	if err := env.err(); err != nil {
		return config{}, err
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err := checkBounds(); err != nil {
		return config{}, err
	}
	c.Join = splitList(join)
	if err := c.redisFlags.parse(c.RedisTimeout); err != nil {
		return config{}, err
	}
	if err := c.regions.parse(); err != nil {
		return config{}, err
	}
	return c, c.validate()
}

func (c config) validate() error {
	var errs []error
	if c.RedisTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--redis-timeout %s must be positive", c.RedisTimeout))
	}
	if c.SweepInterval <= 0 {
		errs = append(errs, fmt.Errorf("--sweep-interval %s must be positive", c.SweepInterval))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("--node-name is required (the hostname could not be read)"))
	}
	if c.FreezeLimit <= 0 {
		errs = append(errs, fmt.Errorf("--freeze-limit %s must be positive", c.FreezeLimit))
	}
	if c.ForwardTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--forward-timeout %s must be positive", c.ForwardTimeout))
	}
	if err := validateStreamWorkers(c.GRPCStreamWorkers); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", c.LogFormat))
	}
	if len(c.Join) > 0 && c.GossipAddr == "" {
		errs = append(errs, errors.New("--join needs --gossip-addr: name the IP:port to gossip on (binding every interface is no longer implied)"))
	}
	if err := checkAdvertiseAddr(c.AdvertiseAddr); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.security.validate(c.GossipAddr, c.AdvertiseAddr)...)
	if _, _, err := c.regions.linkConfig(c.Region, c.NodeName); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func splitList(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func envName(flag string) string {
	return "WEIR_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// envFlags applies WEIR_* values to flags that are not plain strings,
// through the flag's own parser, and collects the values it rejects so that
// a bad environment fails startup like a bad flag does.
type envFlags struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
}

// apply sets the defined flag name from its environment variable, if set.
func (e *envFlags) apply(name string) {
	v := e.getenv(envName(name))
	if v == "" {
		return
	}
	if err := e.fs.Set(name, v); err != nil {
		kind, _ := flag.UnquoteUsage(e.fs.Lookup(name))
		if kind == "" {
			kind = "boolean" // flag names no kind for bools
		}
		e.errs = append(e.errs, fmt.Errorf("%s=%q is not a valid %s for --%s: %w", envName(name), v, kind, name, err))
	}
}

// boolean defines a bool flag whose default comes from the environment.
func (e *envFlags) boolean(p *bool, name string, def bool, usage string) {
	e.fs.BoolVar(p, name, def, usage)
	e.apply(name)
}

func (e *envFlags) err() error { return errors.Join(e.errs...) }

func envOr(getenv func(string) string, flag, def string) string {
	if v := getenv(envName(flag)); v != "" {
		return v
	}
	return def
}

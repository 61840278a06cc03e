package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/client"
)

// benchConfig is the parsed command line of "weir bench".
type benchConfig struct {
	addr     string
	mode     string // "closed" or "open"
	workers  int
	rate     float64 // open loop: arrivals per second
	duration time.Duration
	warmup   time.Duration
	keys     int
	hot      float64
	batch    int
	desc     map[string]string
	keyDesc  string
	cost     int64
	conns    int
	timeout  time.Duration
	json     bool
	tls      *client.TLSConfig // nil: plaintext
	route    bool              // send each request to its group's owner
}

const maxKeys = 10_000_000 // key names are precomputed

const benchSynopsis = `bench [flags]

Closed loop (default): --workers goroutines each send back-to-back.
Open loop: requests arrive on a fixed schedule at --rate per second, and each
latency counts from the request's scheduled start, so queueing delay is
included. At most --workers requests are in flight and as many more wait; an
arrival finding the queue full is dropped and counted, never sent late.

Every request carries the --desc descriptors plus --key-desc set to one of
key-0 .. key-(N-1), chosen uniformly; --hot sends that share of requests to
key-0 instead. --batch 1 sends Decide; a larger batch sends DecideBatch calls
of that many requests. Latency is per RPC. Ctrl-C stops early and reports.`

func parseBench(args []string, stderr io.Writer) (benchConfig, int, bool) {
	var c benchConfig
	fs := newFlagSet("bench", benchSynopsis, stderr)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8081", "`address` of a weir node")
	fs.StringVar(&c.mode, "mode", "closed", "load model: closed or open")
	fs.IntVar(&c.workers, "workers", 16, "closed: concurrent senders; open: the in-flight bound")
	fs.Float64Var(&c.rate, "rate", 20000, "open loop: arrivals (RPCs) per second")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to measure")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "load before measuring, not reported")
	fs.IntVar(&c.keys, "keys", 1000, "distinct values of --key-desc")
	fs.Float64Var(&c.hot, "hot", 0, "share of requests, 0..1, sent to the one hot key key-0")
	fs.IntVar(&c.batch, "batch", 1, "requests per RPC (more than 1 uses DecideBatch)")
	desc := newDescFlag(map[string]string{"tenant": "bench"})
	fs.Var(desc, "desc", "fixed descriptor `NAME=VALUE`; repeat for each")
	fs.StringVar(&c.keyDesc, "key-desc", "user", "descriptor `name` that takes the key values")
	fs.Int64Var(&c.cost, "cost", 1, "units each request costs")
	fs.IntVar(&c.conns, "conns", 4, "gRPC connections; workers share them round-robin")
	fs.DurationVar(&c.timeout, "timeout", time.Second, "per-RPC timeout")
	fs.BoolVar(&c.json, "json", false, "print the summary as JSON")
	fs.BoolVar(&c.route, "route", false, "send each request straight to its group's owner (Go client routing, see docs/architecture.md); --conns routing clients")
	tlsOpts := addTLSFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return c, code, false
	}
	c.desc, c.tls = desc.m, tlsOpts.config()
	if err := c.validate(); err != nil {
		return c, usageError(fs, stderr, err), false
	}
	return c, exitOK, true
}

func (c benchConfig) validate() error {
	switch {
	case c.mode != "closed" && c.mode != "open":
		return fmt.Errorf("--mode must be closed or open, got %q", c.mode)
	case c.workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", c.workers)
	case c.mode == "open" && !(c.rate > 0):
		return fmt.Errorf("--rate must be positive, got %v", c.rate)
	case c.duration <= 0:
		return fmt.Errorf("--duration must be positive, got %v", c.duration)
	case c.warmup < 0:
		return fmt.Errorf("--warmup must not be negative, got %v", c.warmup)
	case c.keys < 1 || c.keys > maxKeys:
		return fmt.Errorf("--keys must be in [1, %d], got %d", maxKeys, c.keys)
	case !(c.hot >= 0 && c.hot <= 1):
		return fmt.Errorf("--hot must be in [0, 1], got %v", c.hot)
	case c.batch < 1:
		return fmt.Errorf("--batch must be at least 1, got %d", c.batch)
	case c.keyDesc == "":
		return errors.New("--key-desc must not be empty")
	case c.cost < 1:
		return fmt.Errorf("--cost must be at least 1, got %d", c.cost)
	case c.conns < 1:
		return fmt.Errorf("--conns must be at least 1, got %d", c.conns)
	case c.timeout <= 0:
		return fmt.Errorf("--timeout must be positive, got %v", c.timeout)
	}
	return nil
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := parseBench(args, stderr)
	if !ok {
		return code
	}
	creds := insecure.NewCredentials()
	if cfg.tls != nil {
		var err error
		if creds, err = cfg.tls.Credentials(); err != nil {
			fmt.Fprintf(stderr, "weir bench: %v\n", err)
			return exitError
		}
	}
	stubs := make([]weirv1.RateLimiterClient, cfg.conns)
	if cfg.route {
		var closeStubs func()
		var err error
		if stubs, closeStubs, err = routedStubs(ctx, cfg); err != nil {
			fmt.Fprintf(stderr, "weir bench: %v\n", err)
			return exitError
		}
		defer closeStubs()
	} else {
		for i := range stubs {
			conn, err := grpc.NewClient(cfg.addr, grpc.WithTransportCredentials(creds))
			if err != nil {
				fmt.Fprintf(stderr, "weir bench: dial %q: %v\n", cfg.addr, err)
				return exitError
			}
			defer conn.Close()
			conn.Connect() // start now rather than in the first measured RPC
			stubs[i] = weirv1.NewRateLimiterClient(conn)
		}
	}
	sum := newBench(cfg, stubs).run(ctx)
	if err := printSummary(stdout, sum, cfg.json); err != nil {
		fmt.Fprintf(stderr, "weir bench: %v\n", err)
		return exitError
	}
	if sum.Requests > 0 && sum.Decisions == 0 {
		fmt.Fprintln(stderr, "weir bench: every request failed")
		return exitError
	}
	return exitOK
}

// bench drives load at one address. Each worker goroutine owns a tally, a
// random source and a connection; nothing is shared while the load runs
// except the open loop's arrival queue.
type bench struct {
	cfg   benchConfig
	stubs []weirv1.RateLimiterClient
	keys  []string

	measureFrom time.Time // end of the warmup
	end         time.Time // end of the run
}

// worker is one sender's private state.
type worker struct {
	rng   *rand.Rand
	stub  weirv1.RateLimiterClient
	tally *tally
}

func newBench(cfg benchConfig, stubs []weirv1.RateLimiterClient) *bench {
	keys := make([]string, cfg.keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	return &bench{cfg: cfg, stubs: stubs, keys: keys}
}

// run applies the load until --duration has been measured or ctx ends, and
// summarizes what was measured.
func (b *bench) run(ctx context.Context) *summary {
	start := time.Now()
	b.measureFrom = start.Add(b.cfg.warmup)
	b.end = b.measureFrom.Add(b.cfg.duration)
	runCtx, cancel := context.WithDeadline(ctx, b.end)
	defer cancel()
	interrupted := make(chan time.Time, 1)
	stopWatch := context.AfterFunc(ctx, func() { interrupted <- time.Now() })

	workers := make([]*worker, b.cfg.workers)
	seed := uint64(start.UnixNano())
	for i := range workers {
		workers[i] = &worker{
			rng:   rand.New(rand.NewPCG(seed, uint64(i))),
			stub:  b.stubs[i%len(b.stubs)],
			tally: newTally(),
		}
	}
	var arrivals, dropped int64
	if b.cfg.mode == "open" {
		// The schedule, not the deadline, ends the open loop, so that a
		// dispatcher running late still sends or drops every arrival due
		// before the end; only an interrupt (ctx) cuts it short.
		arrivals, dropped = b.open(ctx, start, workers)
	} else {
		b.closed(runCtx, workers)
	}
	stopAt := b.end
	if !stopWatch() { // interrupted: measured until then
		if at := <-interrupted; at.Before(stopAt) {
			stopAt = at
		}
	}
	elapsed := max(stopAt.Sub(b.measureFrom), 0)
	return b.summarize(workers, elapsed, arrivals, dropped)
}

// closed runs every worker back-to-back until ctx ends or the run is over.
func (b *bench) closed(ctx context.Context, workers []*worker) {
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(b.end) {
				b.send(w, time.Time{})
			}
		})
	}
	wg.Wait()
}

// open schedules arrivals at the configured rate from start until the run
// is over or ctx ends, hands them to the workers through a bounded queue and
// counts the measured arrivals and those dropped because the queue was full.
// Arrivals already due are handed over at once, without waiting, so a late
// dispatcher catches up rather than skipping them.
func (b *bench) open(ctx context.Context, start time.Time, workers []*worker) (arrivals, dropped int64) {
	queue := make(chan time.Time, len(workers))
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for at := range queue {
				b.send(w, at)
			}
		})
	}
	defer wg.Wait()
	defer close(queue)

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := int64(0); ; i++ {
		// From i, not by adding intervals, so rounding never drifts.
		at := start.Add(time.Duration(float64(i) * float64(time.Second) / b.cfg.rate))
		if !at.Before(b.end) {
			return arrivals, dropped
		}
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return arrivals, dropped
			}
		} else if ctx.Err() != nil {
			return arrivals, dropped
		}
		measured := !at.Before(b.measureFrom)
		if measured {
			arrivals++
		}
		select {
		case queue <- at:
		default:
			if measured {
				dropped++
			}
		}
	}
}

// send makes one RPC and records it if it started (or, in the open loop,
// was scheduled: at) after the warmup. A zero at means "now, once the
// request is built". In-flight RPCs are not cancelled by Ctrl-C: they
// finish, within --timeout, and are counted.
func (b *bench) send(w *worker, at time.Time) {
	reqs := make([]*weirv1.DecideRequest, b.cfg.batch)
	for i := range reqs {
		reqs[i] = b.request(w.rng)
	}
	if at.IsZero() {
		at = time.Now()
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.timeout)
	defer cancel()
	var resps []*weirv1.DecideResponse
	var err error
	if len(reqs) == 1 {
		var resp *weirv1.DecideResponse
		resp, err = w.stub.Decide(ctx, reqs[0])
		resps = []*weirv1.DecideResponse{resp}
	} else {
		var resp *weirv1.DecideBatchResponse
		resp, err = w.stub.DecideBatch(ctx, &weirv1.DecideBatchRequest{Requests: reqs})
		resps = resp.GetResponses()
		if err == nil && len(resps) != len(reqs) {
			err = status.Errorf(codes.Internal, "%d responses for %d requests", len(resps), len(reqs))
		}
	}
	latency := time.Since(at)
	if at.Before(b.measureFrom) {
		return
	}
	w.tally.record(latency, resps, err)
}

func (b *bench) request(rng *rand.Rand) *weirv1.DecideRequest {
	d := make(map[string]string, len(b.cfg.desc)+1)
	maps.Copy(d, b.cfg.desc)
	key := b.keys[0]
	if b.cfg.hot == 0 || rng.Float64() >= b.cfg.hot {
		key = b.keys[rng.IntN(len(b.keys))]
	}
	d[b.cfg.keyDesc] = key
	return &weirv1.DecideRequest{Descriptors: d, Cost: new(b.cfg.cost)}
}

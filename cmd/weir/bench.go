package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"strconv"
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
	rateHalf bool    // open loop at half the closed-loop maximum, measured first
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
--rate half first runs the closed loop with the same flags (warmup and
duration included), then the open loop at half the RPCs/s it completed:
the latency at the owner at half its maximum load.

Every request carries the --desc descriptors plus --key-desc set to one of
key-0 .. key-(N-1), chosen uniformly; --hot sends that share of requests to
key-0 instead. --batch 1 sends Decide; a larger batch sends DecideBatch calls
of that many requests, encoded by hand (without --route), and each answer
is read only for whether its items were allowed, so the load generator costs
the machine as little as it can. Latency is per RPC. Ctrl-C stops early and
reports.`

func parseBench(args []string, stderr io.Writer) (benchConfig, int, bool) {
	var c benchConfig
	fs := newFlagSet("bench", benchSynopsis, stderr)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8081", "`address` of a weir node")
	fs.StringVar(&c.mode, "mode", "closed", "load model: closed or open")
	fs.IntVar(&c.workers, "workers", 16, "closed: concurrent senders; open: the in-flight bound")
	c.rate = 20000
	fs.Var(rateFlag{&c.rate, &c.rateHalf}, "rate", "open loop: arrivals (RPCs) per second, or half: half the closed-loop maximum, measured first")
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
	case c.mode == "open" && !c.rateHalf && !(c.rate > 0):
		return fmt.Errorf("--rate must be positive, got %v", c.rate)
	case c.rateHalf && c.mode != "open":
		return errors.New("--rate half needs --mode open")
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
	var conns []grpc.ClientConnInterface // the batch load's hand-encoded calls; none with --route
	if cfg.route {
		var closeStubs func()
		var err error
		if stubs, closeStubs, err = routedStubs(ctx, cfg); err != nil {
			fmt.Fprintf(stderr, "weir bench: %v\n", err)
			return exitError
		}
		defer closeStubs()
	} else {
		clientConns := make([]*grpc.ClientConn, len(stubs))
		conns = make([]grpc.ClientConnInterface, len(stubs))
		for i := range stubs {
			conn, err := grpc.NewClient(cfg.addr, grpc.WithTransportCredentials(creds))
			if err != nil {
				fmt.Fprintf(stderr, "weir bench: dial %q: %v\n", cfg.addr, err)
				return exitError
			}
			defer conn.Close()
			clientConns[i], conns[i], stubs[i] = conn, conn, weirv1.NewRateLimiterClient(conn)
		}
		if err := waitReady(ctx, clientConns, readyWait); err != nil {
			fmt.Fprintf(stderr, "weir bench: %v; measuring anyway\n", err)
		}
	}
	sum := runLoad(ctx, cfg, stubs, conns)
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

// runLoad runs the configured load. With --rate half it first runs the
// closed loop with the same flags, then the open loop at half the RPCs/s
// that loop answered, and reports both; when the closed loop was
// interrupted or answered nothing, it reports that loop alone (an
// interrupted run reports what it measured; one where every request
// failed is an error to the caller). Batches go through conns, encoded by
// hand (bench_wire.go), when conns has one per stub.
func runLoad(ctx context.Context, cfg benchConfig, stubs []weirv1.RateLimiterClient, conns []grpc.ClientConnInterface) *summary {
	if !cfg.rateHalf {
		return newBench(cfg, stubs, conns).run(ctx)
	}
	closed := cfg
	closed.mode = "closed"
	calib := newBench(closed, stubs, conns).run(ctx)
	rpcs := calib.DecisionsPerSec / float64(cfg.batch) // answered RPCs/s: failures are cheap and would inflate it
	if ctx.Err() != nil || !(rpcs > 0) {
		return calib
	}
	cfg.rate = rpcs / 2
	sum := newBench(cfg, stubs, conns).run(ctx)
	sum.ClosedLoop = calib
	return sum
}

// rateFlag is --rate: a positive number of arrivals per second, or "half".
type rateFlag struct {
	rate *float64
	half *bool
}

func (f rateFlag) String() string {
	switch {
	case f.half != nil && *f.half:
		return "half"
	case f.rate != nil:
		return strconv.FormatFloat(*f.rate, 'g', -1, 64)
	}
	return ""
}

func (f rateFlag) Set(s string) error {
	if s == "half" {
		*f.half = true
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("want arrivals per second or half, got %q", s)
	}
	*f.rate, *f.half = v, false
	return nil
}

// bench drives load at one address. Each worker goroutine owns a tally, a
// random source and a connection; nothing is shared while the load runs
// except the open loop's arrival queue.
type bench struct {
	cfg   benchConfig
	stubs []weirv1.RateLimiterClient
	conns []grpc.ClientConnInterface // nil, or one per stub for the wire batch load
	keys  []string

	measureFrom time.Time // end of the warmup
	end         time.Time // end of the run
}

// worker is one sender's private state. Its requests are built once and
// only their key changes from one RPC to the next (gRPC has encoded them
// by the time a call returns), so that the load generator spends its share
// of the machine on sending, not on building maps.
type worker struct {
	rng   *rand.Rand
	stub  weirv1.RateLimiterClient
	tally *tally
	batch *weirv1.DecideBatchRequest
	wire  *wireBatch // the batch load's hand-encoded request, or nil
	keys  []string   // the wire request's keys
}

// newBench drives stubs; a batch load goes through conns instead (one per
// stub, or nil for the stubs).
func newBench(cfg benchConfig, stubs []weirv1.RateLimiterClient, conns []grpc.ClientConnInterface) *bench {
	keys := make([]string, cfg.keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	b := &bench{cfg: cfg, stubs: stubs, keys: keys}
	if cfg.batch > 1 && len(conns) == len(stubs) {
		b.conns = conns
	}
	return b
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
			batch: b.newBatch(),
		}
		if b.conns != nil {
			workers[i].wire = newWireBatch(b.conns[i%len(b.conns)], b.cfg)
			workers[i].keys = make([]string, b.cfg.batch)
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
	if w.wire != nil {
		b.sendWire(w, at)
		return
	}
	reqs := w.batch.Requests
	for _, r := range reqs {
		r.Descriptors[b.cfg.keyDesc] = b.key(w.rng)
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
		resp, err = w.stub.DecideBatch(ctx, w.batch)
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

// newBatch returns --batch requests carrying the fixed descriptors and the
// cost; send sets each one's key.
func (b *bench) newBatch() *weirv1.DecideBatchRequest {
	reqs := make([]*weirv1.DecideRequest, b.cfg.batch)
	for i := range reqs {
		d := make(map[string]string, len(b.cfg.desc)+1)
		maps.Copy(d, b.cfg.desc)
		reqs[i] = &weirv1.DecideRequest{Descriptors: d, Cost: new(b.cfg.cost)}
	}
	return &weirv1.DecideBatchRequest{Requests: reqs}
}

// key picks a request's key: key-0 with probability --hot, otherwise one
// of --keys uniformly.
func (b *bench) key(rng *rand.Rand) string {
	if b.cfg.hot == 0 || rng.Float64() >= b.cfg.hot {
		return b.keys[rng.IntN(len(b.keys))]
	}
	return b.keys[0]
}

package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/weirhq/weir/client"
)

// runOp runs "weir release|renew|settle TOKEN": one call on a permit or
// reservation token that weir decide printed (base64, as in protojson).
// It exits 0 when the owner held the token, 1 when it did not (released,
// expired or settled before), 2 on a usage error or no answer.
func runOp(ctx context.Context, op string, args []string, stdout, stderr io.Writer) int {
	synopsis := op + " [--addr HOST:PORT] [--timeout D] [TLS flags] TOKEN"
	switch op {
	case "renew":
		synopsis = "renew [--addr HOST:PORT] [--ttl D] [--timeout D] [TLS flags] PERMIT"
	case "settle":
		synopsis = "settle [--addr HOST:PORT] --actual N [--timeout D] [TLS flags] RESERVATION"
	}
	fs := newFlagSet(op, synopsis, stderr)
	addr := fs.String("addr", "127.0.0.1:8081", "`address` of a weir node")
	timeout := fs.Duration("timeout", time.Second, "give up after this long")
	ttl := fs.Duration("ttl", 0, "renew: the permit's new life from now (0: the limit's ttl)")
	actual := fs.Int64("actual", -1, "settle: the request's real cost, >= 0")
	tlsOpts := addTLSFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitError // flag has printed the error and usage
	}
	tok, err := opArgs(fs, op, *timeout, *ttl, *actual)
	if err != nil {
		return usageError(fs, stderr, err)
	}
	cfg := client.DefaultConfig()
	cfg.Target, cfg.Timeout, cfg.TLS = *addr, *timeout, tlsOpts.config()
	c, err := client.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "weir %s: %v\n", op, err)
		return exitError
	}
	defer c.Close()
	held, msg, err := callOp(ctx, c, op, tok, *ttl, *actual)
	if err != nil {
		fmt.Fprintf(stderr, "weir %s: %v\n", op, err)
		return exitError
	}
	fmt.Fprintln(stdout, msg)
	if !held {
		return exitNo
	}
	return exitOK
}

// opArgs checks the flags of op and decodes its one argument.
func opArgs(fs *flag.FlagSet, op string, timeout, ttl time.Duration, actual int64) ([]byte, error) {
	switch {
	case fs.NArg() != 1:
		return nil, fmt.Errorf("want one token, got %d arguments", fs.NArg())
	case timeout <= 0:
		return nil, fmt.Errorf("--timeout must be positive, got %v", timeout)
	case ttl < 0:
		return nil, fmt.Errorf("negative --ttl %v", ttl)
	case ttl != 0 && op != "renew":
		return nil, errors.New("--ttl is for renew")
	case actual >= 0 && op != "settle":
		return nil, errors.New("--actual is for settle")
	case actual < 0 && op == "settle":
		return nil, errors.New("settle needs --actual N, N >= 0")
	}
	tok, err := base64.StdEncoding.DecodeString(fs.Arg(0))
	if err != nil || len(tok) == 0 {
		return nil, fmt.Errorf("the token is not base64 (as weir decide prints it): %q", fs.Arg(0))
	}
	return tok, nil
}

// callOp makes the call and says what came of it.
func callOp(ctx context.Context, c *client.Client, op string, tok []byte, ttl time.Duration, actual int64) (held bool, msg string, err error) {
	switch op {
	case "release":
		if held, err = c.Release(ctx, tok); held {
			msg = "released"
		}
	case "renew":
		var in time.Duration
		if in, held, err = c.Renew(ctx, tok, ttl); held {
			msg = fmt.Sprintf("renewed: expires in %v", in)
		}
	case "settle":
		var s client.Settlement
		s, err = c.Settle(ctx, tok, actual)
		if held = s.Settled; held {
			msg = fmt.Sprintf("settled: refunded %d, extra %d, forgiven %d", s.Refunded, s.Extra, s.Forgiven)
		}
	}
	if err == nil && !held {
		what := "permit"
		if op == "settle" {
			what = "reservation"
		}
		msg = "not held: the owner has no such " + what + " (released, settled or expired before)"
	}
	return held, msg, err
}

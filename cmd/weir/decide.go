package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/client"
)

func runDecide(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("decide", "decide [--addr HOST:PORT] -d NAME=VALUE... [--cost N] [--reserve] [--timeout D] [--json] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE]", stderr)
	addr := fs.String("addr", "127.0.0.1:8081", "`address` of a weir node")
	desc := newDescFlag(nil)
	fs.Var(desc, "d", "request descriptor `NAME=VALUE`; repeat for each")
	cost := fs.Int64("cost", 1, "units the request costs")
	reserve := fs.Bool("reserve", false, "keep the charge as a reservation to settle later (weir settle)")
	timeout := fs.Duration("timeout", time.Second, "give up after this long")
	asJSON := fs.Bool("json", false, "print the response as protobuf JSON")
	tlsOpts := addTLSFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	switch {
	case len(desc.m) == 0:
		return usageError(fs, stderr, errors.New("at least one -d NAME=VALUE is required"))
	case *cost < 0:
		return usageError(fs, stderr, fmt.Errorf("negative --cost %d", *cost))
	case *timeout <= 0:
		return usageError(fs, stderr, fmt.Errorf("--timeout must be positive, got %v", *timeout))
	}

	cfg := client.DefaultConfig()
	cfg.Target = *addr
	cfg.Timeout = *timeout
	cfg.TLS = tlsOpts.config()
	c, err := client.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "weir decide: %v\n", err)
		return exitError
	}
	defer c.Close()
	var resp *weirv1.DecideResponse
	if *reserve {
		_, resp, err = c.Reserve(ctx, desc.m, *cost)
	} else {
		resp, err = c.Decide(ctx, desc.m, *cost)
	}
	if err != nil {
		fmt.Fprintf(stderr, "weir decide: %v\n", err)
		return exitError
	}
	if err := printDecision(stdout, resp, *asJSON); err != nil {
		fmt.Fprintf(stderr, "weir decide: %v\n", err)
		return exitError
	}
	if !resp.GetAllowed() {
		return exitNo
	}
	return exitOK
}

func printDecision(w io.Writer, resp *weirv1.DecideResponse, asJSON bool) error {
	if !asJSON {
		_, err := io.WriteString(w, formatDecision(resp))
		return err
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(resp)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// formatDecision renders resp for people: the verdict first, then the
// numbers, then one line per matched limit.
func formatDecision(resp *weirv1.DecideResponse) string {
	var b strings.Builder
	switch {
	case resp.GetTooCostly():
		b.WriteString("DENIED: the cost exceeds a limit's burst, the request can never pass\n")
	case !resp.GetAllowed():
		fmt.Fprintf(&b, "DENIED: retry after %v\n", resp.GetRetryAfter().AsDuration())
	case !resp.GetMatched():
		b.WriteString("ALLOWED: no limit matched\n")
	default:
		b.WriteString("ALLOWED\n")
	}
	if resp.GetMatched() {
		fmt.Fprintf(&b, "remaining:    %d\n", resp.GetRemaining())
		fmt.Fprintf(&b, "reset after:  %v\n", resp.GetResetAfter().AsDuration())
	}
	if v := resp.GetPolicyVersion(); v != "" {
		fmt.Fprintf(&b, "policy:       %s\n", v)
	}
	if fb := resp.GetFallback(); fb != nil {
		fmt.Fprintf(&b, "fallback:     %s (%s)\n", fb.GetMode(), fb.GetReason())
	}
	// Tokens are bearer secrets; printed for weir release|renew|settle.
	if p := resp.GetPermit(); len(p) > 0 {
		fmt.Fprintf(&b, "permit:       %s\n", base64.StdEncoding.EncodeToString(p))
	}
	if r := resp.GetReservation(); len(r) > 0 {
		fmt.Fprintf(&b, "reservation:  %s\n", base64.StdEncoding.EncodeToString(r))
	}
	if len(resp.GetLimits()) > 0 {
		b.WriteString("limits:\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAME\tVERDICT\tREMAINING\tRETRY AFTER\tRESET AFTER\tQUOTA\tKEY")
		for _, l := range resp.GetLimits() {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%v\t%v\t%d per %v\t%s\n",
				l.GetName(), limitVerdict(l), l.GetRemaining(), l.GetRetryAfter().AsDuration(),
				l.GetResetAfter().AsDuration(), l.GetBurst(), l.GetWindow().AsDuration(), l.GetKey())
		}
		tw.Flush()
	}
	return b.String()
}

func limitVerdict(l *weirv1.LimitStatus) string {
	v := "denied"
	switch {
	case l.GetTooCostly():
		v = "too costly"
	case l.GetAllowed():
		v = "allowed"
	}
	if l.GetShadow() {
		v += " (shadow)"
	}
	return v
}

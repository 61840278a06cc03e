package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/weirhq/weir/admin"
)

// inspected is one key's answer and the node that gave it.
type inspected struct {
	Node string `json:"node"`
	admin.KeyState
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("inspect", "inspect [--addr HOST:PORT,...] [--json] KEY...", stderr)
	var a adminFlags
	a.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitError
	}
	keys := fs.Args()
	addrs, err := a.list()
	switch {
	case err != nil:
		return usageError(fs, stderr, err)
	case len(keys) == 0 || len(keys) > admin.MaxInspectKeys:
		return usageError(fs, stderr, fmt.Errorf("want 1 to %d KEYs (as weir decide prints them), got %d", admin.MaxInspectKeys, len(keys)))
	}
	answers, ok := ask[[]admin.KeyState](ctx, "inspect", &a, addrs, admin.InspectPath, url.Values{"key": keys}, stderr)
	if !ok {
		return exitError
	}
	out := pickHolders(keys, answers)
	if a.asJSON {
		printJSON(stdout, out)
		return exitOK
	}
	printInspect(stdout, out)
	return exitOK
}

// pickHolders keeps, per key, the answer of the node that holds it (its
// group's owner), or the first answer when none does.
func pickHolders(keys []string, answers []admin.Answer[[]admin.KeyState]) []inspected {
	out := make([]inspected, len(keys))
	for i := range keys {
		for j, ans := range answers {
			if i >= len(ans.Value) {
				continue
			}
			if ks := ans.Value[i]; j == 0 || ks.Held && !out[i].Held {
				out[i] = inspected{Node: ans.Addr, KeyState: ks}
			}
		}
	}
	return out
}

func printInspect(w io.Writer, ks []inspected) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tLIMIT\tNODE\tREMAINING\tRETRY AFTER\tRESET AFTER\tTAT")
	for _, k := range ks {
		switch {
		case k.Error != "":
			fmt.Fprintf(tw, "%s\t%s\t%s\terror: %s\t\t\t\n", k.Key, k.Limit, k.Node, k.Error)
		case k.Kind == "concurrency" && k.Held:
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d in flight, %d free\t%s\t%s\t-\n", k.Key, k.Limit, k.Node, k.InFlight, k.Burst, k.Remaining, micros(k.RetryAfterUS), micros(k.ResetAfterUS))
			for _, p := range k.Permits {
				fmt.Fprintf(tw, "  permit %s\t\t\tcost %d\t\texpires in %s\t\n", p.ID, p.Cost, micros(p.ExpiresInUS))
			}
		case !k.Held:
			fmt.Fprintf(tw, "%s\t%s\t-\t%d/%d (rested or not held by any node asked)\t0\t0\t-\n", k.Key, k.Limit, k.Burst, k.Burst)
		default:
			tat := time.UnixMicro(k.TAT).UTC().Format(time.RFC3339Nano)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", k.Key, k.Limit, k.Node, k.Remaining, k.Burst, micros(k.RetryAfterUS), micros(k.ResetAfterUS), tat)
		}
	}
	tw.Flush()
}

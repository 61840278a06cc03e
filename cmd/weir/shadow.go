package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/weirhq/weir/shadow"
)

func runShadow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("shadow", "shadow [--addr HOST:PORT,...] [--since D] [--top N] [--json]", stderr)
	var a adminFlags
	a.register(fs)
	since := fs.Duration("since", 0, "report the last `D` (e.g. 24h); 0 for everything the nodes keep")
	top := fs.Int("top", 10, "keys to show per shadow limit")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	addrs, err := a.list()
	switch {
	case err != nil:
		return usageError(fs, stderr, err)
	case *since < 0:
		return usageError(fs, stderr, fmt.Errorf("negative --since %v", *since))
	case *top < 1:
		return usageError(fs, stderr, fmt.Errorf("--top must be at least 1, got %d", *top))
	}
	q := url.Values{}
	if *since > 0 {
		q.Set("since", since.String())
	}
	answers, ok := ask[shadow.Report](ctx, "shadow", &a, addrs, shadow.Path, q, stderr)
	if !ok {
		return exitError
	}
	reports := make([]shadow.Report, len(answers))
	for i, ans := range answers {
		reports[i] = ans.Value
	}
	rep := shadow.Merge(*top, reports...)
	if a.asJSON {
		printJSON(stdout, rep)
		return exitOK
	}
	printShadow(stdout, rep)
	return exitOK
}

func printShadow(w io.Writer, rep shadow.Report) {
	fmt.Fprintf(w, "shadow limits, %d nodes, %s to %s\n", len(rep.Nodes), rep.From.UTC().Format(time.DateTime), rep.Until.UTC().Format(time.DateTime+" UTC"))
	if len(rep.Limits) == 0 {
		fmt.Fprintln(w, "no shadow limit would have denied anything")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LIMIT\tWOULD DENY\tTOP KEYS\tCOUNT")
	for _, l := range rep.Limits {
		fmt.Fprintf(tw, "%s\t%d\t\t\n", l.Limit, l.WouldDeny)
		for _, c := range l.Top {
			est := fmt.Sprint(c.Count)
			if c.Err > 0 {
				est = fmt.Sprintf("%d (at least %d)", c.Count, c.Count-c.Err)
			}
			fmt.Fprintf(tw, "\t\t%s\t%s\n", c.Key, est)
		}
	}
	tw.Flush()
	if rep.Dropped > 0 {
		fmt.Fprintf(w, "%d would-denies were not recorded: the nodes track a bounded number of shadow limits\n", rep.Dropped)
	}
}

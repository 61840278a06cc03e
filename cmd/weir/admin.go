package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/tlsfiles"
)

// adminFlags are the flags shared by shadow, status and inspect, which ask
// the nodes' admin listeners (--admin-addr on the node).
type adminFlags struct {
	addrs   string
	timeout time.Duration
	asJSON  bool
	tls     *tlsFlags
}

func (a *adminFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.addrs, "addr", "127.0.0.1:8092", "comma-separated admin `addresses` of the nodes to ask (their --admin-addr; every node, for a whole-cluster view)")
	fs.DurationVar(&a.timeout, "timeout", 5*time.Second, "give up on a node after this long")
	fs.BoolVar(&a.asJSON, "json", false, "print JSON for scripts instead of a table")
	a.tls = addTLSFlags(fs)
}

// client returns the HTTP client for the admin listeners and the addresses
// to give admin.Ask: with a --tls* flag, HTTPS with the client certificate
// (a node with --peer-tls-* requires one from the cluster CA).
func (a *adminFlags) client(addrs []string) (*http.Client, []string, error) {
	c := &http.Client{Timeout: a.timeout}
	tc := a.tls.config()
	if tc == nil {
		return c, addrs, nil
	}
	if err := tc.Validate(); err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: tc.ServerName}
	if tc.CAFile != "" || tc.CertFile != "" {
		s, err := tlsfiles.Load(tlsfiles.Config{CertFile: tc.CertFile, KeyFile: tc.KeyFile, CAFile: tc.CAFile}, nil)
		if err != nil {
			return nil, nil, err
		}
		cfg = s.ClientConfig(tc.ServerName)
	}
	c.Transport = &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
	out := make([]string, len(addrs))
	for i, addr := range addrs {
		out[i] = addr
		if !strings.Contains(addr, "://") {
			out[i] = "https://" + addr
		}
	}
	return c, out, nil
}

func (a *adminFlags) list() ([]string, error) {
	var out []string
	for _, s := range strings.Split(a.addrs, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--addr names no node")
	}
	if a.timeout <= 0 {
		return nil, fmt.Errorf("--timeout must be positive, got %v", a.timeout)
	}
	return out, nil
}

// ask asks every node, reporting progress and failed nodes on stderr, and
// returns the answers that arrived; ok is false when none did (or the TLS
// flags are unusable).
func ask[T any](ctx context.Context, cmd string, a *adminFlags, addrs []string, path string, q url.Values, stderr io.Writer) (got []admin.Answer[T], ok bool) {
	c, addrs, err := a.client(addrs)
	if err != nil {
		fmt.Fprintf(stderr, "weir %s: %v\n", cmd, err)
		return nil, false
	}
	progress := func(done, total int) {
		if total > 1 {
			fmt.Fprintf(stderr, "\r%s: %d/%d nodes answered", cmd, done, total)
			if done == total {
				fmt.Fprintln(stderr)
			}
		}
	}
	for _, ans := range admin.Ask[T](ctx, c, addrs, path, q, progress) {
		if ans.Err != nil {
			fmt.Fprintf(stderr, "weir %s: %s: %v\n", cmd, ans.Addr, ans.Err)
			continue
		}
		got = append(got, ans)
	}
	return got, len(got) > 0
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// micros formats microseconds as a short duration.
func micros(us int64) string {
	if us == 0 {
		return "0"
	}
	return (time.Duration(us) * time.Microsecond).String()
}

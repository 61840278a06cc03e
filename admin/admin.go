package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// Paths of the admin endpoints (the shadow report's is shadow.Path).
const (
	StatusPath  = "/admin/status"
	InspectPath = "/admin/inspect"
	// MaxInspectKeys bounds the keys of one inspect call.
	MaxInspectKeys = 100
)

// Status is one node's view of itself and the cluster.
type Status struct {
	Node          string   `json:"node"`
	PolicyVersion string   `json:"policy_version"`
	Members       []string `json:"members"` // sorted, the node itself included
	// Breakers maps a dependency (Redis, a peer) to closed, half_open or open.
	Breakers map[string]string `json:"breakers"`
	// Figures are metric values summed over their labels: decisions,
	// fallbacks, store errors, write-behind lag and pending marks, keys in
	// memory, forwards, Envoy requests, and lease and region figures.
	Figures map[string]float64 `json:"figures"`
}

// KeyState is one key's state as /admin/inspect reads it.
type KeyState struct {
	Key   string `json:"key"`
	Limit string `json:"limit,omitempty"`
	// Held: the answering node holds the key in owner memory. Otherwise
	// the figures are empty: its group's owner is another node, or the key
	// is rested and was swept.
	Held bool `json:"held"`
	// TAT is the stored theoretical arrival time, Unix microseconds.
	TAT int64 `json:"tat_unix_micros,omitempty"`
	// Remaining, RetryAfter and ResetAfter are what a request of cost 1
	// would see now, under the limit's own rate and burst (before tier
	// and tenant overrides).
	Remaining    int64  `json:"remaining"`
	RetryAfterUS int64  `json:"retry_after_micros"`
	ResetAfterUS int64  `json:"reset_after_micros"`
	Burst        int64  `json:"burst,omitempty"`
	Error        string `json:"error,omitempty"`
	// Kind is "concurrency" for a concurrency limit's key; then InFlight
	// is the units of live permits, Burst the limit's max_in_flight,
	// Remaining the free slots, RetryAfter the wait until a slot frees by
	// expiry, ResetAfter until the last permit expires, and Permits lists
	// them. Empty for a rate limit's key.
	Kind     string        `json:"kind,omitempty"`
	InFlight int64         `json:"in_flight,omitempty"`
	Permits  []PermitState `json:"permits,omitempty"`
}

// PermitState is one live permit of a concurrency key. ID is the first 4
// bytes of the permit's id in hex: enough to tell permits apart, never the
// whole id, which is the permit itself.
type PermitState struct {
	ID          string `json:"id"`
	Cost        int64  `json:"cost"`
	ExpiresInUS int64  `json:"expires_in_micros"`
}

// Answer is one node's reply to Ask.
type Answer[T any] struct {
	Addr  string
	Value T
	Err   error
}

// Ask sends GET path?query to every addr at once and decodes each JSON
// reply into a T. An addr is host:port of a node's admin listener (plain
// HTTP) or a base URL such as https://host:port, for which c's transport
// carries the TLS configuration. Answers come back in addrs order; a node that fails has Err set. progress, if not
// nil, is called as each node answers.
func Ask[T any](ctx context.Context, c *http.Client, addrs []string, path string, query url.Values, progress func(done, total int)) []Answer[T] {
	out := make([]Answer[T], len(addrs))
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = Answer[T]{Addr: addr}
			out[i].Err = get(ctx, c, addr, path, query, &out[i].Value)
			if progress != nil {
				mu.Lock()
				done++
				progress(done, len(addrs))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

func get(ctx context.Context, c *http.Client, addr, path string, query url.Values, v any) error {
	u, err := target(addr, path, query)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("admin: %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("admin: %s%s: %s: %s", addr, path, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("admin: %s%s: %w", addr, path, err)
	}
	return nil
}

// target is the URL of path?query on addr, a host:port (plain HTTP) or a
// base URL with an http or https scheme.
func target(addr, path string, query url.Values) (string, error) {
	u := &url.URL{Scheme: "http", Host: addr}
	if strings.Contains(addr, "://") {
		var err error
		if u, err = url.Parse(addr); err != nil {
			return "", fmt.Errorf("admin: address %q: %w", addr, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			return "", fmt.Errorf("admin: address %q: want host:port or http(s)://host:port", addr)
		}
	}
	u.Path, u.RawQuery = path, query.Encode()
	return u.String(), nil
}

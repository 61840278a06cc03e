package redisconn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Endpoint is what a URL, or a list of them, says about the servers.
type Endpoint struct {
	Addrs              []string // host:port, the port defaulted to 6379
	Username, Password string   // from user:password@; both may be empty
	DB                 int      // from the path, /0 to /N
	TLS                bool     // rediss://
	ClientName         string   // ?client_name=
	Protocol           int      // ?protocol=2 or 3; 0 if not given
}

// QueryOptions are the URL query options ParseURL accepts; any other is an
// error, so a misspelt option is never silently ignored.
var QueryOptions = []string{"client_name", "protocol"}

const (
	defaultPort         = "6379"
	defaultSentinelPort = "26379"
)

// ParseURL parses redis://[user[:password]@]host[:port][/db][?options] or
// rediss://... (TLS), or a bare host:port. The port defaults to 6379. A
// user without a password is an error (Redis AUTH needs one; give the
// password in a file instead and the user with Username). Errors never
// contain the password.
func ParseURL(raw string) (Endpoint, error) {
	if !strings.Contains(raw, "://") {
		addr, err := withPort(raw, defaultPort)
		if err != nil {
			return Endpoint{}, err
		}
		return Endpoint{Addrs: []string{addr}}, nil
	}
	shown := RedactURL(raw)
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return Endpoint{}, fmt.Errorf("%s: %w", shown, err)
	}
	var e Endpoint
	switch u.Scheme {
	case "redis":
	case "rediss":
		e.TLS = true
	default:
		return Endpoint{}, fmt.Errorf("%s: scheme %q: want redis:// or rediss://", shown, u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return Endpoint{}, fmt.Errorf("%s: no host", shown)
	}
	addr, err := withPort(u.Host, defaultPort)
	if err != nil {
		return Endpoint{}, fmt.Errorf("%s: %w", shown, err)
	}
	e.Addrs = []string{addr}
	if u.User != nil {
		e.Username = u.User.Username()
		e.Password, _ = u.User.Password()
		if e.Password == "" {
			return Endpoint{}, fmt.Errorf("%s: user %q without a password: put the password in the URL or a password file, and the user in the username setting", shown, e.Username)
		}
	}
	if e.DB, err = parseDB(u.Path); err != nil {
		return Endpoint{}, fmt.Errorf("%s: %w", shown, err)
	}
	if err := e.parseQuery(u.Query()); err != nil {
		return Endpoint{}, fmt.Errorf("%s: %w", shown, err)
	}
	return e, nil
}

func parseDB(path string) (int, error) {
	p := strings.TrimPrefix(path, "/")
	if p == "" {
		return 0, nil
	}
	db, err := strconv.Atoi(p)
	if err != nil || db < 0 {
		return 0, fmt.Errorf("database %q: want a number, 0 or more", p)
	}
	return db, nil
}

func (e *Endpoint) parseQuery(q url.Values) error {
	for k, vs := range q {
		if !slices.Contains(QueryOptions, k) {
			return fmt.Errorf("unknown option %q (supported: %s)", k, strings.Join(QueryOptions, ", "))
		}
		if len(vs) != 1 {
			return fmt.Errorf("option %q given %d times", k, len(vs))
		}
	}
	e.ClientName = q.Get("client_name")
	if p := q.Get("protocol"); p != "" {
		switch p {
		case "2", "3":
			e.Protocol = int(p[0] - '0')
		default:
			return fmt.Errorf("option protocol=%q: want 2 or 3", p)
		}
	}
	return nil
}

// withPort checks host[:port] and adds port def when it has none.
func withPort(hp, def string) (string, error) {
	if hp == "" {
		return "", errors.New("empty address")
	}
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			host, port = strings.Trim(hp, "[]"), def
		} else {
			return "", fmt.Errorf("address %q: %w", hp, err)
		}
	}
	if host == "" {
		return "", fmt.Errorf("address %q has no host", hp)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("address %q: port %q: want 1 to 65535", hp, port)
	}
	return net.JoinHostPort(host, port), nil
}

// ParseSeeds parses a Redis Cluster's seeds, each a bare host:port or a
// URL as ParseURL takes. Every URL must say the same thing apart from its
// address (one client connects to all of them), bare addresses take what
// the URLs say, and the database must be 0: Redis Cluster has only that.
func ParseSeeds(seeds []string) (Endpoint, error) {
	if len(seeds) == 0 {
		return Endpoint{}, errors.New("no seeds")
	}
	var out Endpoint
	var first string // the URL out's settings came from
	for _, s := range seeds {
		e, err := ParseURL(s)
		if err != nil {
			return Endpoint{}, err
		}
		out.Addrs = append(out.Addrs, e.Addrs...)
		if !strings.Contains(s, "://") {
			continue
		}
		e.Addrs = nil
		if e.DB != 0 {
			return Endpoint{}, fmt.Errorf("%s: database %d: Redis Cluster has database 0 only", RedactURL(s), e.DB)
		}
		if first == "" {
			first = s
			addrs := out.Addrs
			out, out.Addrs = e, addrs
			continue
		}
		cur := out
		cur.Addrs = nil
		if !endpointEqual(cur, e) {
			return Endpoint{}, fmt.Errorf("%s and %s differ in more than their address: every seed must use the same scheme, user, password and options", RedactURL(first), RedactURL(s))
		}
	}
	return out, nil
}

func endpointEqual(a, b Endpoint) bool {
	return a.Username == b.Username && a.Password == b.Password && a.DB == b.DB &&
		a.TLS == b.TLS && a.ClientName == b.ClientName && a.Protocol == b.Protocol
}

// ParseSentinel parses MASTER@host:port,host:port,...: the master's name
// as the sentinels know it, and the sentinels' addresses (the port
// defaults to 26379).
func ParseSentinel(s string) (master string, addrs []string, err error) {
	master, list, ok := strings.Cut(s, "@")
	if !ok || master == "" {
		return "", nil, fmt.Errorf("%q: want MASTER@host:port,host:port,... (the master's name as the sentinels know it, then the sentinels)", s)
	}
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		addr, err := withPort(a, defaultSentinelPort)
		if err != nil {
			return "", nil, fmt.Errorf("sentinel %w", err)
		}
		addrs = append(addrs, addr)
	}
	if len(addrs) == 0 {
		return "", nil, fmt.Errorf("%q names no sentinel", s)
	}
	return master, addrs, nil
}

// RedactURL returns raw with the password of its user information, if
// any, replaced by "xxxxx". It works on text that does not parse as a URL
// too: everything between "user:" and the last "@" is hidden.
func RedactURL(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	rest := raw[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return raw[:i+3] + user + ":" + redacted + rest[at:]
}

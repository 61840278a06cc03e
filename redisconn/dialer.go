package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// maxRemembered bounds the host names a dialer keeps an answer for: the
// configured addresses, and the names a Cluster or Sentinel announces.
const maxRemembered = 64

// keepAlive is go-redis's own TCP keep-alive for the connections it dials.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}

// lookupTimeout bounds one lookup of a name, which goes on after the dial
// that started it stopped waiting, so that its answer is remembered.
const lookupTimeout = 10 * time.Second

// relookupAfter is how long a lookup in flight serves the dials of its
// name before a dial starts another; maxLookups bounds a name's lookups in
// flight (a new one beyond it cancels the oldest).
const (
	relookupAfter = 500 * time.Millisecond
	maxLookups    = 4
)

// dialer makes go-redis's connections. A dial by host name includes the
// name's lookup, and the system resolver can stall: one lost UDP packet
// costs a lookup the resolver's whole timeout (5 s by default), a name
// asked of an upstream that does not answer more, and Go's resolver makes
// every lookup of a name in that time wait on the one in flight. A node
// that lost its connections (a timeout under load, a Redis restart) would
// then fail every dial for seconds although Redis is up at the address it
// had a moment ago, or at the new address the resolver would give at once
// if asked again. So once a name has resolved, a dial waits for its
// lookup half of the dial's time, and when the lookup has not answered by
// then, or failed for a temporary reason, the dial uses the name's last
// answer. A lookup runs on by itself (at most lookupTimeout), so an
// answer that comes late is still remembered for the next dial; a dial
// that finds the name's newest lookup older than relookupAfter asks again
// on a resolver of its own, so a lookup stuck since before a move (a
// container restarted at a new address) does not hold the next ones. A
// name that does not exist (NXDOMAIN) is an error, never the old answer.
type dialer struct {
	newResolver func() *net.Resolver // one per lookup: Go's resolver shares a name's lookups in flight
	tls         *tls.Config          // nil for plaintext
	logger      *slog.Logger

	// base is the lookups' context: close cancels it.
	base   context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	hosts map[string]*host // at most maxRemembered
}

// host is what a dialer knows of one name.
type host struct {
	last     []netip.Addr // the newest lookup's good answer
	lastFrom time.Time    // when the lookup that gave last started
	stale    bool         // dialled from last since it came
	lookups  []*lookup    // in flight, oldest first
}

// lookup is one lookup of a name; done closes when addrs and err are set.
type lookup struct {
	started time.Time
	cancel  context.CancelFunc
	done    chan struct{}
	addrs   []netip.Addr
	err     error
}

func newDialer(conf *tls.Config, logger *slog.Logger) *dialer {
	d := &dialer{newResolver: func() *net.Resolver { return &net.Resolver{} },
		tls: conf, logger: logger, hosts: map[string]*host{}}
	d.base, d.cancel = context.WithCancel(context.Background())
	return d
}

// close ends the lookups in flight (their dials fail, as the client is
// closing).
func (d *dialer) close() { d.cancel() }

// DialContext is go-redis's Options.Dialer. ctx carries the attempt's
// deadline (Options.DialTimeout); the TLS handshake, if any, is within it.
func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := net.Dialer{KeepAliveConfig: keepAlive}
	host, port, splitErr := net.SplitHostPort(addr)
	_, ipErr := netip.ParseAddr(host)
	byName := splitErr == nil && ipErr != nil && (network == "tcp" || network == "tcp4" || network == "tcp6")
	var conn net.Conn
	var err error
	if byName {
		conn, err = d.dialName(ctx, &nd, network, host, port)
	} else {
		conn, err = nd.DialContext(ctx, network, addr)
	}
	if err != nil || d.tls == nil {
		return conn, err
	}
	conf := d.tls
	if conf.ServerName == "" {
		conf = conf.Clone()
		conf.ServerName = host // the name dialled, never the address it resolved to
	}
	tc := tls.Client(conn, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// dialName resolves host (see dialer) and dials its addresses in turn
// until one connects.
func (d *dialer) dialName(ctx context.Context, nd *net.Dialer, network, host, port string) (net.Conn, error) {
	addrs, err := d.lookup(ctx, host)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var first error
	for _, a := range addrs {
		if network == "tcp4" && !a.Is4() || network == "tcp6" && !a.Is6() {
			continue
		}
		conn, err := nd.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if first == nil {
		first = &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("%s has no %s address", host, network)}
	}
	return nil, first
}

// lookup returns name's addresses: the resolver's answer, or, when it is
// late or fails for a temporary reason, the last one it gave.
func (d *dialer) lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	d.mu.Lock()
	h := d.hosts[name]
	if h == nil {
		if len(d.hosts) >= maxRemembered {
			d.mu.Unlock()
			return d.newResolver().LookupNetIP(ctx, "ip", name)
		}
		h = &host{}
		d.hosts[name] = h
	}
	var l *lookup
	if n := len(h.lookups); n > 0 && time.Since(h.lookups[n-1].started) < relookupAfter {
		l = h.lookups[n-1]
	} else {
		l = d.start(name, h)
	}
	known := h.last != nil
	d.mu.Unlock()
	var late <-chan time.Time
	if dl, ok := ctx.Deadline(); ok && known {
		t := time.NewTimer(time.Until(dl) / 2)
		defer t.Stop()
		late = t.C
	}
	var err error
	select {
	case <-l.done:
		if l.err == nil {
			return l.addrs, nil
		}
		err = l.err
	case <-late:
		err = &net.DNSError{Err: "no answer within half the dial's time", Name: name, IsTimeout: true}
	case <-ctx.Done():
		return nil, &net.DNSError{Err: ctx.Err().Error(), Name: name, IsTimeout: true}
	}
	if !known || !transient(err) {
		return nil, err
	}
	d.mu.Lock()
	last, first := h.last, !h.stale // an older lookup may have answered since
	h.stale = true
	d.mu.Unlock()
	if first {
		d.logger.Warn("redis: name lookup failing; dialling its last addresses", "host", name, "addrs", last, "err", err)
	}
	return last, nil
}

// start begins a lookup of name for h, under d.mu; beyond maxLookups in
// flight it cancels the oldest, whose answer is the least worth waiting
// for.
func (d *dialer) start(name string, h *host) *lookup {
	if len(h.lookups) == maxLookups {
		h.lookups[0].cancel()
		h.lookups = h.lookups[1:]
	}
	ctx, cancel := context.WithTimeout(d.base, lookupTimeout)
	l := &lookup{started: time.Now(), cancel: cancel, done: make(chan struct{})}
	h.lookups = append(h.lookups, l)
	go d.resolve(ctx, name, h, l)
	return l
}

// resolve runs l and remembers a good answer unless a lookup that started
// later already gave one.
func (d *dialer) resolve(ctx context.Context, name string, h *host, l *lookup) {
	defer l.cancel()
	addrs, err := d.newResolver().LookupNetIP(ctx, "ip", name)
	if err == nil && len(addrs) == 0 {
		err = &net.DNSError{Err: "no addresses", Name: name, IsNotFound: true}
	}
	d.mu.Lock()
	h.lookups = slices.DeleteFunc(h.lookups, func(o *lookup) bool { return o == l })
	if err == nil && !l.started.Before(h.lastFrom) {
		h.last, h.lastFrom = addrs, l.started
		if h.stale {
			h.stale = false
			d.logger.Info("redis: name lookup answering again", "host", name, "addrs", addrs)
		}
	}
	if h.last == nil && len(h.lookups) == 0 && d.hosts[name] == h {
		delete(d.hosts, name) // nothing to remember
	}
	d.mu.Unlock()
	l.addrs, l.err = addrs, err
	close(l.done)
}

// transient reports whether a lookup error says nothing about the name:
// a timeout, a temporary failure, no answer. A name found not to exist
// is not.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return !de.IsNotFound
	}
	return true
}

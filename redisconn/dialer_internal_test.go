package redisconn

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/weirhq/weir/dnstest"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

const testName = "redis.test" // in tlstest certificates' names below

// nameClient is a client of addr's port at testName, resolved by a test
// DNS server that knows testName as 127.0.0.1.
func nameClient(t *testing.T, addr string, cfg Config) (*Client, *dnstest.Server) {
	t.Helper()
	dns := dnstest.Start(t, "127.0.0.1:0")
	dns.Set(testName, netip.MustParseAddr("127.0.0.1"))
	_, port, _ := net.SplitHostPort(addr)
	cfg.Mode, cfg.Addrs = Single, []string{net.JoinHostPort(testName, port)}
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.dialer.newResolver = func() *net.Resolver { return &net.Resolver{PreferGo: true, Dial: dns.Dial} } // before any dial
	return c, dns
}

// pingWithin pings until one succeeds, each with the client's own
// timeout as its deadline, or within runs out.
func pingWithin(c *Client, within time.Duration) error {
	end := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
		err := c.rdb.Ping(ctx).Err()
		cancel()
		if err == nil || time.Now().After(end) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killClients closes every connection srv's clients hold, as a Redis
// restart or a timeout would: the next command must dial.
func killClients(t *testing.T, srv *redistest.Server) {
	t.Helper()
	if err := srv.Client().Do(t.Context(), "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestDialer_silentResolver_dialsLastAnswer: a client that reached Redis
// by name loses its connections while the resolver holds every query
// unanswered (a lost UDP packet costs a Go lookup 5 s; a stalled resolver
// more). It must reconnect to the address the name had, with the
// default timeout, while the resolver is still silent.
func TestDialer_silentResolver_dialsLastAnswer(t *testing.T) {
	srv := redistest.Start(t)
	c, dns := nameClient(t, srv.Addr(), DefaultConfig())
	if err := pingWithin(c, 5*time.Second); err != nil {
		t.Fatalf("with the resolver answering: %v", err)
	}
	dns.Hold()
	killClients(t, srv)
	held := dns.Queries()
	if err := pingWithin(c, 3*time.Second); err != nil {
		t.Fatalf("resolver silent, Redis up at the name's address: %v", err)
	}
	if dns.Queries() == held {
		t.Error("the dial did not ask the resolver first")
	}
}

// TestDialer_nameGone_isAnError: a name the resolver says does not exist
// is an error, never its last answer.
func TestDialer_nameGone_isAnError(t *testing.T) {
	srv := redistest.Start(t)
	c, dns := nameClient(t, srv.Addr(), DefaultConfig())
	if err := pingWithin(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	dns.Delete(testName)
	killClients(t, srv)
	if err := pingWithin(c, 500*time.Millisecond); err == nil {
		t.Fatal("dialled a name the resolver says does not exist")
	}
}

// TestDialer_TLS_verifiesTheNameNotTheAddress: dialled by name (from the
// last answer too), the server's certificate must carry the name.
func TestDialer_TLS_verifiesTheNameNotTheAddress(t *testing.T) {
	ca := tlstest.NewCA(t, "redis-ca")
	for _, tc := range []struct {
		names []string
		ok    bool
	}{{[]string{testName}, true}, {[]string{"127.0.0.1"}, false}} {
		f := ca.WriteFiles(t, t.TempDir(), "redis", "redis", tc.names...)
		srv := redistest.StartTLS(t, redistest.TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA}, false)
		cfg := DefaultConfig()
		cfg.Timeout = time.Second // about TLS, not latency
		cfg.TLS = TLS{Enabled: true, CAFile: f.CA}
		c, dns := nameClient(t, srv.TLSAddr, cfg)
		err := pingWithin(c, 2*time.Second)
		if tc.ok != (err == nil) {
			t.Fatalf("certificate for %v: ping error %v, want ok %v", tc.names, err, tc.ok)
		}
		if !tc.ok {
			continue
		}
		dns.Hold()
		killClients(t, srv.Server)
		if err := pingWithin(c, 3*time.Second); err != nil {
			t.Fatalf("TLS from the last answer: %v", err)
		}
	}
}

// TestDialer_lateAnswerIsRemembered: a resolver slower than half a dial's
// time leaves that dial with the name's last answer, but its answer, when
// it comes, is what the next dials use: a name that moved (a failover by
// DNS) is followed even through a slow resolver.
func TestDialer_lateAnswerIsRemembered(t *testing.T) {
	srv := redistest.Start(t)
	c, dns := nameClient(t, srv.Addr(), DefaultConfig())
	if err := pingWithin(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	dns.SetDelay(300 * time.Millisecond)
	dns.Set(testName, netip.MustParseAddr("127.0.0.2")) // nothing listens there
	killClients(t, srv)
	if err := pingWithin(c, 2*time.Second); err != nil {
		t.Fatalf("while the slow answer is on its way, the last one serves: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // the answer came, and was remembered
	killClients(t, srv)
	if err := pingWithin(c, 300*time.Millisecond); err == nil {
		t.Fatal("still dialling the old address after the resolver answered the new one")
	}
}

// TestDialer_stuckLookup_doesNotHoldTheNext: the name moved (a container
// restarted at a new address) while the resolver dropped the lookups in
// flight, which wait out the resolver's timeout (5 s); the resolver
// answers again at once. The client must find the new address within a
// second or so, not dial the old one until the stuck lookup ends.
func TestDialer_stuckLookup_doesNotHoldTheNext(t *testing.T) {
	srv := redistest.Start(t)
	c, dns := nameClient(t, srv.Addr(), DefaultConfig())
	if err := pingWithin(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	dns.Set(testName, netip.MustParseAddr("127.0.0.2")) // Redis gone from there: nothing listens
	killClients(t, srv)
	if err := pingWithin(c, time.Second); err == nil {
		t.Fatal("reached Redis at an address where nothing listens")
	}
	dns.Drop(true)
	if err := pingWithin(c, time.Second); err == nil { // lookups stuck, dials of 127.0.0.2 refused
		t.Fatal("reached Redis at an address where nothing listens")
	}
	dns.Set(testName, netip.MustParseAddr("127.0.0.1")) // back, at another address
	dns.Drop(false)
	start := time.Now()
	if err := pingWithin(c, 2*time.Second); err != nil {
		t.Fatalf("the name answers its new address at once, but after %v: %v", time.Since(start), err)
	}
	t.Logf("reconnected %v after the resolver answered again", time.Since(start))
}

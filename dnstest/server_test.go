package dnstest_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/weirhq/weir/dnstest"
)

func lookup(r *net.Resolver, name string, within time.Duration) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return r.LookupNetIP(ctx, "ip", name)
}

func TestServer_answersHoldsAndForgets(t *testing.T) {
	srv := dnstest.Start(t, "127.0.0.1:0")
	r := &net.Resolver{PreferGo: true, Dial: srv.Dial}
	want := netip.MustParseAddr("127.0.0.7")
	srv.Set("db.weir.test", want)
	if got, err := lookup(r, "db.weir.test", 2*time.Second); err != nil || len(got) != 1 || got[0] != want {
		t.Fatalf("known name: %v, %v; want [%v]", got, err, want)
	}
	var de *net.DNSError
	if _, err := lookup(r, "other.weir.test", 2*time.Second); !errors.As(err, &de) || !de.IsNotFound {
		t.Fatalf("unknown name: %v, want not found", err)
	}
	srv.SetDelay(150 * time.Millisecond)
	start := time.Now()
	if _, err := lookup(r, "db.weir.test", 2*time.Second); err != nil || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("delayed: %v after %s, want an answer after 150ms", err, time.Since(start))
	}
	srv.SetDelay(0)
	srv.Hold()
	if _, err := lookup(r, "db.weir.test", 200*time.Millisecond); !errors.As(err, &de) || !de.IsTimeout {
		t.Fatalf("held: %v, want a timeout", err)
	}
	srv.Release()
	if _, err := lookup(r, "db.weir.test", 2*time.Second); err != nil {
		t.Fatalf("released: %v", err)
	}
	srv.Delete("db.weir.test")
	if _, err := lookup(r, "db.weir.test", 2*time.Second); !errors.As(err, &de) || !de.IsNotFound {
		t.Fatalf("deleted: %v, want not found", err)
	}
}

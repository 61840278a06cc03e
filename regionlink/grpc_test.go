package regionlink

import (
	"context"
	"io"
	stdnet "net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/region"
)

// serve serves h over weir.region.v1 on a :0 port until the test ends and
// returns its address.
func serve(t *testing.T, h Handler) string {
	t.Helper()
	lis, err := stdnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	Register(s, h)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func TestClient_Send_overGRPC(t *testing.T) {
	n, clk := newNet(), newClock()
	k := keyHomedIn(t, "eu", 0)
	eu := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	clk.Advance(2 * testShares().TTL) // past the home's quiet period
	addr := serve(t, eu)
	c := NewClient(nil)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	r := region.Report{From: "us", Reporter: "us-1#1", Home: "eu", Seq: 7, Items: []region.Demand{{Key: k, Demand: 0.5}}}
	reply, err := c.Send(ctx, addr, r, false)
	if err != nil {
		t.Fatal(err)
	}
	if reply.To != "us" || reply.Reporter != "us-1#1" || reply.Seq != 7 || len(reply.Grants) != 1 ||
		reply.Grants[0].Key != k || reply.Grants[0].Share != region.Whole-testShares().Floor || reply.Grants[0].TTL != int64(testShares().TTL) {
		t.Fatalf("reply %+v", reply)
	}

	r.Items[0].Demand = -1
	_, err = c.Send(ctx, addr, r, false)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a negative demand: %v, want INVALID_ARGUMENT", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, addr, r, false); err == nil {
		t.Fatal("Send after Close succeeded")
	}
}

// stallingRelay accepts connections on a :0 port and holds them without a
// byte (a cut link) until open, after which new connections reach target.
type stallingRelay struct {
	lis    stdnet.Listener
	target string
	open   chan struct{}
}

func newStallingRelay(t *testing.T, target string) *stallingRelay {
	t.Helper()
	lis, err := stdnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &stallingRelay{lis: lis, target: target, open: make(chan struct{})}
	var held []stdnet.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			select {
			case <-r.open:
				go pipe(in, target)
			default:
				mu.Lock()
				held = append(held, in)
				mu.Unlock()
			}
		}
	}()
	return r
}

func pipe(in stdnet.Conn, target string) {
	defer in.Close()
	out, err := stdnet.Dial("tcp", target)
	if err != nil {
		return
	}
	defer out.Close()
	go func() { io.Copy(out, in); out.Close() }()
	io.Copy(in, out)
}

// TestClient_Send_redialsAfterAStalledConnection: a connection that
// stalled (packets dropped by a cut) is not reused once the link heals.
func TestClient_Send_redialsAfterAStalledConnection(t *testing.T) {
	n, clk := newNet(), newClock()
	eu := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	relay := newStallingRelay(t, serve(t, eu))
	c := NewClient(nil)
	t.Cleanup(func() { c.Close() })
	r := region.Report{From: "us", Reporter: "us-1#1", Home: "eu", Seq: 1}
	send := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := c.Send(ctx, relay.lis.Addr().String(), r, false)
		return err
	}
	if err := send(200 * time.Millisecond); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("over the cut link: %v, want DeadlineExceeded", err)
	}
	close(relay.open) // healed: new connections get through
	if err := send(5 * time.Second); err != nil {
		t.Fatalf("after the heal: %v (the stalled connection was reused)", err)
	}
}

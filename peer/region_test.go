package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdnet "net"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/grpclimit/grpclimittest"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/metrictest"
	"github.com/weirhq/weir/region"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

// fakeRegion answers a report with one grant per item (share 1000, TTL =
// Seq), refuses a negative demand with region.ErrInvalidReport and a
// report from "broken" with another error. With hang set it waits for the
// caller's context, like a stalled home.
type fakeRegion struct {
	hang  atomic.Bool
	calls atomic.Int64
	mu    sync.Mutex
	got   []region.Report
	fwd   []bool
}

func (f *fakeRegion) Handle(ctx context.Context, r region.Report, forwarded bool) (region.Reply, error) {
	f.calls.Add(1)
	f.mu.Lock()
	f.got, f.fwd = append(f.got, r), append(f.fwd, forwarded)
	f.mu.Unlock()
	if f.hang.Load() {
		<-ctx.Done()
		return region.Reply{}, ctx.Err()
	}
	if r.From == "broken" {
		return region.Reply{}, errors.New("home ledger broken")
	}
	reply := region.Reply{Home: r.Home, To: r.From, Reporter: r.Reporter, Seq: r.Seq}
	for _, it := range r.Items {
		if it.Demand < 0 {
			return region.Reply{}, fmt.Errorf("%w: negative demand", region.ErrInvalidReport)
		}
		reply.Grants = append(reply.Grants, region.Grant{Key: it.Key, Share: 1000, TTL: int64(r.Seq)})
	}
	return reply, nil
}

// startRegionServer serves h and rh on a free loopback port.
func startRegionServer(t testing.TB, h Handler, rh RegionHandler) string {
	t.Helper()
	return grpclimittest.Serve(t, nil, func(s *grpc.Server) { Register(s, h, WithRegion(rh)) })
}

func report(seq uint64) region.Report {
	return region.Report{From: "us", Reporter: "us-1#1", Home: "eu", Seq: seq,
		Items: []region.Demand{{Key: "weir:{a}:glob:a", Demand: 0.5, Ack: 3}, {Key: "weir:{b}:glob:b", Demand: 2}}}
}

func TestClient_Send_roundTrip(t *testing.T) {
	rh := &fakeRegion{}
	addr := startRegionServer(t, &fakeHandler{}, rh)
	c, _ := newClient(t, nil)
	reply, err := c.Send(t.Context(), addr, report(7), true)
	if err != nil {
		t.Fatal(err)
	}
	want := region.Reply{Home: "eu", To: "us", Reporter: "us-1#1", Seq: 7, Grants: []region.Grant{
		{Key: "weir:{a}:glob:a", Share: 1000, TTL: 7}, {Key: "weir:{b}:glob:b", Share: 1000, TTL: 7}}}
	if !reflect.DeepEqual(reply, want) {
		t.Fatalf("reply %+v, want %+v", reply, want)
	}
	if !reflect.DeepEqual(rh.got[0], report(7)) || !rh.fwd[0] {
		t.Fatalf("the handler got %+v forwarded %v, want %+v forwarded", rh.got[0], rh.fwd[0], report(7))
	}

	bad := report(8)
	bad.Items[1].Demand = -1
	if _, err := c.Send(t.Context(), addr, bad, false); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a refused report: %v, want INVALID_ARGUMENT", err)
	}
	broken := report(9)
	broken.From = "broken"
	if _, err := c.Send(t.Context(), addr, broken, false); status.Code(err) != codes.Internal {
		t.Fatalf("a handler error: %v, want INTERNAL", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(t.Context(), addr, report(10), false); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close: %v, want ErrClosed", err)
	}
}

// Without WithRegion (or with a nil handler) the peer server serves no
// Region: a report is UNIMPLEMENTED.
func TestRegister_withoutRegion(t *testing.T) {
	c, _ := newClient(t, nil)
	for name, addr := range map[string]string{
		"no option":   startServer(t, &fakeHandler{}),
		"nil handler": startRegionServer(t, &fakeHandler{}, nil),
	} {
		if _, err := c.Send(t.Context(), addr, report(1), false); status.Code(err) != codes.Unimplemented {
			t.Fatalf("%s: %v, want UNIMPLEMENTED", name, err)
		}
	}
}

// countingListener counts the connections it accepted.
type countingListener struct {
	stdnet.Listener
	n atomic.Int64
}

func (l *countingListener) Accept() (stdnet.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// serveCounting serves h and rh on a counting listener until the test ends.
func serveCounting(t *testing.T, h Handler, rh RegionHandler) (string, *countingListener) {
	t.Helper()
	lis, err := stdnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: lis}
	s := grpc.NewServer(DefaultServerConfig().ServerOptions()...)
	Register(s, h, WithRegion(rh))
	go s.Serve(cl)
	t.Cleanup(s.Stop)
	return lis.Addr().String(), cl
}

// Decide, Lease and region reports to one peer share one connection.
func TestClient_oneConnectionPerPeer(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	addr, lis := serveCounting(t, newGrantHandler(t, now), &fakeRegion{})
	c, _ := newClient(t, nil)
	for range 3 {
		if _, err := c.Decide(t.Context(), addr, item(now)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Lease(t.Context(), addr, lease.Refresh{Seq: 1, Items: []lease.Request{tenantLease(0)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(t.Context(), addr, report(1), false); err != nil {
			t.Fatal(err)
		}
	}
	if n := lis.n.Load(); n != 1 {
		t.Fatalf("%d connections accepted, want 1 for every kind of call", n)
	}
	c.Forget(addr)
	if _, err := c.Send(t.Context(), addr, report(2), false); err != nil {
		t.Fatal(err)
	}
	if n := lis.n.Load(); n != 2 {
		t.Fatalf("%d connections after Forget and a report, want a second one", n)
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
	var wg sync.WaitGroup
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, in) // closed when the test ends
			mu.Unlock()
			select {
			case <-r.open:
				wg.Go(func() { pipe(in, target) })
			default:
			}
		}
	})
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
// stalled (packets dropped by a cut) is not reused once the link heals,
// by reports or by forwards.
func TestClient_Send_redialsAfterAStalledConnection(t *testing.T) {
	relay := newStallingRelay(t, startRegionServer(t, &fakeHandler{}, &fakeRegion{}))
	c, reg := newClient(t, func(c *ClientConfig) { c.Timeout = 5 * time.Second })
	send := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := c.Send(ctx, relay.lis.Addr().String(), report(1), false)
		return err
	}
	if err := send(200 * time.Millisecond); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("over the cut link: %v, want DeadlineExceeded", err)
	}
	if got := metrictest.Value(t, reg, "weir_peer_redials_total"); got != 1 {
		t.Fatalf("weir_peer_redials_total = %v, want 1", got)
	}
	close(relay.open) // healed: new connections get through
	if err := send(5 * time.Second); err != nil {
		t.Fatalf("after the heal: %v (the stalled connection was reused)", err)
	}
	if _, err := c.Decide(t.Context(), relay.lis.Addr().String(), item(1)); err != nil {
		t.Fatalf("a forward after the heal: %v", err)
	}
}

// A redial leaves the RPCs running on the old connection alone: a forward
// in flight when a report times out still gets its answer, and the old
// connection closes after it.
func TestClient_Send_redialKeepsRPCsInFlight(t *testing.T) {
	gate, release := newGate(t)
	entered := make(chan struct{}, 1)
	rh := &fakeRegion{}
	rh.hang.Store(true)
	addr := startRegionServer(t, &fakeHandler{gate: gate, entered: entered}, rh)
	c, reg := newClient(t, nil)
	done := make(chan error, 1)
	go func() {
		_, err := c.Decide(t.Context(), addr, item(1))
		done <- err
	}()
	<-entered // the forward runs on the first connection
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Send(ctx, addr, report(1), false); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a hung home: %v, want DeadlineExceeded", err)
	}
	if got := metrictest.Value(t, reg, "weir_peer_redials_total"); got != 1 {
		t.Fatalf("weir_peer_redials_total = %v, want 1", got)
	}
	if n := retired(c, addr); n != 1 {
		t.Fatalf("%d retired connections, want the forward's", n)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("the forward in flight during the redial: %v", err)
	}
	// The forward's stream ends once the owner has seen it closed for
	// sending, and the old connection with it.
	waitFor(t, "the retired connection to close", func() bool { return retired(c, addr) == 0 })
	rh.hang.Store(false)
	if _, err := c.Send(t.Context(), addr, report(2), false); err != nil {
		t.Fatalf("a report over the new connection: %v", err)
	}
}

// retired reports how many replaced connections to addr still carry RPCs.
func retired(c *Client, addr string) int {
	c.mu.Lock()
	p := c.mu.peers[addr]
	c.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.retired)
}

// Region reports travel on the mutual-TLS peer plane like forwards: only a
// peer with a certificate from the cluster CA is answered.
func TestClient_Send_TLS_mutual(t *testing.T) {
	dir := t.TempDir()
	ca, rogueCA := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "rogue")
	good := ca.WriteFiles(t, dir, "server", "node-a", "127.0.0.1")
	rh := &fakeRegion{}
	addr := tlstest.ServeGRPC(t, good, func(s *grpc.Server) { Register(s, &fakeHandler{}, WithRegion(rh)) })
	client := ca.WriteFiles(t, dir, "client", "node-b")
	roguePeer := rogueCA.WriteFiles(t, dir, "rogue-client", "rogue")
	roguePeer.CA = good.CA
	for _, tc := range []struct {
		name   string
		creds  credentials.TransportCredentials
		wantOK bool
	}{
		{"cluster certificate", client.Store(t).ClientCredentials(""), true},
		{"plaintext peer", nil, false},
		{"certificate from another CA", roguePeer.Store(t).ClientCredentials(""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newClient(t, func(c *ClientConfig) { c.TLS = tc.creds })
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			_, err := c.Send(ctx, addr, report(1), false)
			if (err == nil) != tc.wantOK {
				t.Fatalf("Send error %v, want success %v", err, tc.wantOK)
			}
		})
	}
	if n := rh.calls.Load(); n != 1 {
		t.Fatalf("the region handler answered %d reports, want only the authenticated peer's 1", n)
	}
}

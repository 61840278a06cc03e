package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/grpclimit/grpclimittest"
	"github.com/weirhq/weir/limiter"
)

func descriptor(name, value string) []byte {
	var entry []byte
	entry = protowire.AppendTag(entry, 1, protowire.BytesType)
	entry = protowire.AppendString(entry, name)
	entry = protowire.AppendTag(entry, 2, protowire.BytesType)
	entry = protowire.AppendString(entry, value)
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(b, entry)
}

// Bytes that are not a valid request are the caller's fault:
// INVALID_ARGUMENT, not INTERNAL, and nothing is decided.
func TestGRPC_malformedRequestIsInvalidArgument(t *testing.T) {
	d := &fakeDecider{}
	conn := grpclimittest.DialRaw(t, startGatedGRPC(t, d, nil))
	batchOf := func(req []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), req)
	}
	for name, tc := range map[string]struct {
		method string
		raw    []byte
	}{
		"garbage":                {"Decide", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
		"truncated":              {"Decide", descriptor("tenant", "acme")[:6]},
		"invalid UTF-8 value":    {"Decide", descriptor("tenant", "\xff\xfe")},
		"invalid UTF-8 in batch": {"DecideBatch", batchOf(descriptor("tenant", "\xc3"))},
		"33 descriptors": {"Decide", func() (b []byte) {
			for i := range 33 {
				b = append(b, descriptor(fmt.Sprint("d", i), "v")...)
			}
			return b
		}()},
	} {
		t.Run(name, func(t *testing.T) {
			var out weirv1.DecideResponse
			err := conn.Invoke(withTimeout(t), "/weir.v1.RateLimiter/"+tc.method, &tc.raw, &out)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("err = %v, want INVALID_ARGUMENT", err)
			}
		})
	}
	if n := d.callCount(); n != 0 {
		t.Fatalf("%d requests reached the decider", n)
	}
	// A valid request still decodes.
	ok := descriptor("user", "u1")
	var out weirv1.DecideResponse
	if err := conn.Invoke(withTimeout(t), "/weir.v1.RateLimiter/Decide", &ok, &out); err != nil || !out.GetAllowed() {
		t.Fatalf("valid request: %v, %v", &out, err)
	}
}

// The largest valid batch is accepted; the constants are what the API's
// limits encode to.
func TestGRPC_largestValidBatchFits(t *testing.T) {
	name, value := strings.Repeat("n", limiter.MaxDescriptorBytes), strings.Repeat("v", limiter.MaxDescriptorBytes)
	var req []byte
	for i := range limiter.MaxDescriptors {
		req = append(req, descriptor(fmt.Sprintf("%03d", i)+name[3:], value)...)
	}
	// The widest cost: a 10-byte varint (-1).
	req = protowire.AppendVarint(protowire.AppendTag(req, 2, protowire.VarintType), uint64(1<<64-1))
	req = protowire.AppendVarint(protowire.AppendTag(req, 3, protowire.VarintType), 1) // reserve
	if n := len(req); n != MaxDecideRequestBytes {
		t.Fatalf("largest request is %d bytes, MaxDecideRequestBytes says %d", n, MaxDecideRequestBytes)
	}
	var raw []byte
	for range limiter.MaxBatch {
		raw = protowire.AppendBytes(protowire.AppendTag(raw, 1, protowire.BytesType), req)
	}
	if n := len(raw); n != MaxDecideBatchRequestBytes {
		t.Fatalf("largest batch is %d bytes, MaxDecideBatchRequestBytes says %d", n, MaxDecideBatchRequestBytes)
	}
	conn := grpclimittest.DialRaw(t, startGatedGRPC(t, &fakeDecider{}, nil))
	var out weirv1.DecideBatchResponse
	err := conn.Invoke(withTimeout(t), "/weir.v1.RateLimiter/DecideBatch", &raw, &out)
	// The cost of -1 makes the request checks refuse it: the batch was
	// read and decoded, not refused for its size.
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "cost -1") {
		t.Fatalf("err = %v, want the cost refusal", err)
	}
}

// Many concurrent 4 MB Decide calls (350 k tiny descriptors each, once
// enough to take a node to gigabytes) are refused before decoding, the heap
// stays bounded, and a normal caller keeps getting answers.
func TestGRPC_hugeRequestsRefusedEarly(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 400 MB")
	}
	conn := grpclimittest.DialRaw(t, startGatedGRPC(t, &fakeDecider{}, nil))
	var huge []byte
	for i := 0; len(huge) < 4<<20-64; i++ { // just under gRPC's default cap
		huge = append(huge, descriptor(fmt.Sprint(i), "v")...)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var peak sync.WaitGroup
	var maxHeap uint64
	stop := make(chan struct{})
	peak.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			maxHeap = max(maxHeap, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for range 32 {
		wg.Go(func() {
			for range 3 {
				var out weirv1.DecideResponse
				err := conn.Invoke(ctx, "/weir.v1.RateLimiter/Decide", &huge, &out)
				if status.Code(err) != codes.ResourceExhausted {
					errs <- fmt.Errorf("huge call: %v, want RESOURCE_EXHAUSTED", err)
				}
			}
		})
	}
	normal := descriptor("user", "u1")
	for range 20 {
		var out weirv1.DecideResponse
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		err := conn.Invoke(cctx, "/weir.v1.RateLimiter/Decide", &normal, &out)
		ccancel()
		if err != nil || !out.GetAllowed() {
			t.Errorf("normal caller: %v, %v", &out, err)
		}
	}
	wg.Wait()
	close(stop)
	peak.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// 32 calls in flight hold their 4 MB buffers (128 MB) and nothing
	// more: decoding one into maps took about 100 MB each.
	if grew := int64(maxHeap) - int64(before.HeapInuse); grew > 400<<20 {
		t.Fatalf("heap in use grew by %d MB at its peak", grew>>20)
	}
}

// serveHTTP serves srv on a free loopback port until the test ends and
// returns its address.
func serveHTTP(t *testing.T, srv *HTTPServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	return lis.Addr().String()
}

// A client that sends its headers and then trickles (or never sends) its
// body, or idles on a keep-alive connection, is disconnected after the
// timeout instead of holding its connection forever.
func TestHTTPServer_slowAndIdleConnectionsClosed(t *testing.T) {
	cfg := DefaultHTTPServerConfig()
	cfg.ReadHeaderTimeout, cfg.ReadTimeout, cfg.IdleTimeout = 200*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	reg := prometheus.NewRegistry()
	srv, err := NewHTTPServer(cfg, NewHTTPHandler(DefaultHTTPConfig(), &fakeDecider{}, nil, nil, nil), nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveHTTP(t, srv)
	for name, send := range map[string]string{
		"slow body":       "POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{",
		"slow headers":    "POST /v1/decide HTTP/1.1\r\nHost: x\r\n",
		"idle keep-alive": "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, send); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			c.SetReadDeadline(start.Add(10 * time.Second))
			_, err = io.Copy(io.Discard, c) // returns when the server closes
			if err != nil {
				t.Fatalf("connection not closed by the server: %v", err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("closed after %v", took)
			}
		})
	}
}

func TestHTTPServer_connectionCap(t *testing.T) {
	cfg := DefaultHTTPServerConfig()
	cfg.MaxConns = 2
	srv, err := NewHTTPServer(cfg, NewHTTPHandler(DefaultHTTPConfig(), &fakeDecider{}, nil, nil, nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveHTTP(t, srv)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	third, err := net.Dial("tcp", addr) // the kernel accepts; the server does not
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	io.WriteString(third, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var ne net.Error
	if _, err := third.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("third connection answered while two were open: %v", err)
	}
	held[0].Close()
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err != nil {
		t.Fatalf("third connection not served after one closed: %v", err)
	}
	held[1].Close()
}

func TestGRPCConfig_Validate(t *testing.T) {
	if err := DefaultGRPCConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultGRPCConfig()
	c.MaxRecvMsgBytes, c.MaxConcurrentStreams, c.KeepaliveTime = 1<<20, 0, 0
	err := c.Validate()
	for _, want := range []string{"below the largest valid request", "streams", "keepalive time"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to mention %q", err, want)
		}
	}
	if err := DefaultHTTPServerConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (HTTPServerConfig{}).Validate(); err == nil {
		t.Fatal("zero HTTPServerConfig passed")
	}
}

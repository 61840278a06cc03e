package httplimit_test

import (
	"fmt"
	"net/http"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/client"
	"github.com/weirhq/weir/httplimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

func ExampleWriteHeaders() {
	resp := &weirv1.DecideResponse{
		Matched:    true,
		RetryAfter: durationpb.New(50 * time.Millisecond),
		Limits: []*weirv1.LimitStatus{{
			Name: "per-user", Burst: 20, Window: durationpb.New(time.Second),
			ResetAfter: durationpb.New(time.Second),
		}},
	}
	h := http.Header{}
	httplimit.WriteHeaders(h, resp)
	fmt.Println(httplimit.StatusCode(resp))
	fmt.Println(h.Get("RateLimit-Policy"))
	fmt.Println(h.Get("RateLimit"))
	fmt.Println(h.Get("Retry-After"))
	// Output:
	// 429
	// "per-user";q=20;w=1
	// "per-user";r=0;t=1
	// 1
}

func ExampleMiddleware() {
	conn, err := grpc.NewClient("weir.internal:8081", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	d := httplimit.FromClient(weirv1.NewRateLimiterClient(conn))
	describe := func(r *http.Request) (map[string]string, int64, bool) {
		tenant := r.Header.Get("X-Tenant")
		if tenant == "" {
			return nil, 0, false // not limited
		}
		return map[string]string{"tenant": tenant, "route": r.URL.Path}, 1, true
	}
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	limited := httplimit.Middleware(d, describe,
		httplimit.WithTimeout(20*time.Millisecond),
		httplimit.WithErrorPolicy(httplimit.FailClosed),
	)(app)
	_ = limited
}

// *client.Client is an Acquirer.
var _ httplimit.Acquirer = (*client.Client)(nil)

func ExampleConcurrencyMiddleware() {
	cfg := client.DefaultConfig()
	cfg.Target = "weir.internal:8081"
	c, err := client.New(cfg)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	// The policy limits exports per tenant with kind: concurrency.
	describe := func(r *http.Request) (map[string]string, int64, bool) {
		tenant := r.Header.Get("X-Tenant")
		if tenant == "" {
			return nil, 0, false // not limited
		}
		return map[string]string{"tenant": tenant, "op": "export"}, 1, true
	}
	export := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Runs while the permit is held (and renewed); it is released
		// when this returns, or panics.
	})
	mux := http.NewServeMux()
	mux.Handle("/export", httplimit.ConcurrencyMiddleware(c, describe,
		httplimit.WithTimeout(100*time.Millisecond),
	)(export))
	_ = mux
}

package deploy

import (
	"encoding/json"
	"os"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	// Types the bootstrap names in typed_config, registered for protojson.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/weirhq/weir/policy"
)

// loadBootstrap decodes envoy/envoy.yaml as Envoy would: YAML to JSON to
// the Bootstrap proto, unknown fields refused, then proto validation.
func loadBootstrap(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	data, err := os.ReadFile("envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(raw, &b); err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	return &b
}

// envoySetup is what the bootstrap tells the ratelimit filter.
type envoySetup struct {
	filter  *ratelimitv3.RateLimit
	actions [][]*routev3.RateLimit_Action // per rate_limits entry
}

func envoyRateLimit(t *testing.T, b *bootstrapv3.Bootstrap) envoySetup {
	t.Helper()
	var out envoySetup
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
					continue
				}
				for _, hf := range hcm.GetHttpFilters() {
					var rl ratelimitv3.RateLimit
					if hf.GetTypedConfig().UnmarshalTo(&rl) == nil {
						out.filter = &rl
					}
				}
				for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
					for _, r := range vh.GetRoutes() {
						for _, rl := range r.GetRoute().GetRateLimits() {
							out.actions = append(out.actions, rl.GetActions())
						}
					}
				}
			}
		}
	}
	if out.filter == nil {
		t.Fatal("no envoy.filters.http.ratelimit filter")
	}
	return out
}

func TestEnvoy_bootstrapPointsAtWeir(t *testing.T) {
	b := loadBootstrap(t)
	setup := envoyRateLimit(t, b)
	cluster := setup.filter.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	found := false
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() != cluster {
			continue
		}
		found = true
		addr := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		if addr.GetPortValue() != 8081 {
			t.Errorf("cluster %s port %d, want weir's gRPC port 8081", cluster, addr.GetPortValue())
		}
		if c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"] == nil {
			t.Errorf("cluster %s does not speak HTTP/2, which gRPC needs", cluster)
		}
	}
	if !found {
		t.Fatalf("the rate limit service's cluster %q is not defined", cluster)
	}
	if setup.filter.GetFailureModeDeny() {
		t.Error("failure_mode_deny is on; the docs say Envoy admits when weir is unreachable")
	}
}

// TestEnvoy_descriptorsAreAnsweredByThePolicy derives the descriptors the
// route's actions send and checks that deploy/policy.yaml has a limit for
// each in the filter's domain.
func TestEnvoy_descriptorsAreAnsweredByThePolicy(t *testing.T) {
	setup := envoyRateLimit(t, loadBootstrap(t))
	p, err := policy.LoadFile("policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	domain := setup.filter.GetDomain()
	if len(setup.actions) == 0 {
		t.Fatal("the route sends no descriptors")
	}
	for i, actions := range setup.actions {
		var entries []policy.EnvoyEntry
		for _, a := range actions {
			switch {
			case a.GetRemoteAddress() != nil:
				entries = append(entries, policy.EnvoyEntry{Key: "remote_address", Value: "192.0.2.1"})
			case a.GetRequestHeaders() != nil:
				entries = append(entries, policy.EnvoyEntry{Key: a.GetRequestHeaders().GetDescriptorKey(), Value: "/x"})
			default:
				t.Fatalf("rate_limits[%d]: action %v is not understood by this test", i, a)
			}
		}
		if m, ok := p.ResolveEnvoy(domain, entries); !ok {
			t.Errorf("rate_limits[%d] sends %v in domain %q; no limit in policy.yaml answers it", i, entries, domain)
		} else {
			t.Logf("rate_limits[%d] -> limit %s", i, m.Limit.Name)
		}
	}
}

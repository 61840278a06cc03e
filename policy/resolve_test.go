package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/weirhq/weir/gcra"
)

const resolveYAML = `
tenants:
  acme: {overrides: {per-user: {burst: 9}, per-route: {shadow: false}}}
limits:
  - {name: per-user, match: [tenant, user], rate: 5/s, burst: 3}
  - {name: per-tenant, match: [tenant], rate: 100/s, burst: 50}
  - {name: per-route, match: [tenant, route], group: route, rate: 1/s, burst: 1, shadow: true}
  - {name: by-key, match: [api_key], rate: 10/s, burst: 10}
`

func TestPolicy_Resolve(t *testing.T) {
	p := mustParse(t, resolveYAML)
	user := gcra.Limit{Interval: 200_000_000, Burst: 3}
	tenant := gcra.Limit{Interval: 10_000_000, Burst: 50}
	route := gcra.Limit{Interval: 1_000_000_000, Burst: 1}
	for _, tc := range []struct {
		name string
		desc map[string]string
		want []Match // Limit filled in from Key's limit name
	}{
		{"nothing", map[string]string{}, nil},
		{"nil map", nil, nil},
		{"tenant only", map[string]string{"tenant": "t1"}, []Match{
			{Key: "weir:{t1}:per-tenant:t1", GroupValue: "t1", Params: tenant},
		}},
		{"tenant and user, policy order", map[string]string{"user": "u1", "tenant": "t1"}, []Match{
			{Key: "weir:{t1}:per-user:t1:u1", GroupValue: "t1", Params: user},
			{Key: "weir:{t1}:per-tenant:t1", GroupValue: "t1", Params: tenant},
		}},
		{"user alone matches nothing", map[string]string{"user": "u1"}, nil},
		{"group other than first", map[string]string{"tenant": "t1", "route": "/a"}, []Match{
			{Key: "weir:{t1}:per-tenant:t1", GroupValue: "t1", Params: tenant},
			{Key: "weir:{/a}:per-route:t1:/a", GroupValue: "/a", Params: route, Shadow: true},
		}},
		{"empty value is absent", map[string]string{"tenant": "t1", "user": ""}, []Match{
			{Key: "weir:{t1}:per-tenant:t1", GroupValue: "t1", Params: tenant},
		}},
		{"escaping", map[string]string{"tenant": "a}b{c", "user": "x:y%z"}, []Match{
			{Key: "weir:{a%7Db%7Bc}:per-user:a%7Db%7Bc:x%3Ay%25z", GroupValue: "a}b{c", Params: user},
			{Key: "weir:{a%7Db%7Bc}:per-tenant:a%7Db%7Bc", GroupValue: "a}b{c", Params: tenant},
		}},
		{"overrides by tenant", map[string]string{"tenant": "acme", "user": "u", "route": "r"}, []Match{
			{Key: "weir:{acme}:per-user:acme:u", GroupValue: "acme", Params: gcra.Limit{Interval: 200_000_000, Burst: 9}},
			{Key: "weir:{acme}:per-tenant:acme", GroupValue: "acme", Params: tenant},
			{Key: "weir:{r}:per-route:acme:r", GroupValue: "r", Params: route, Shadow: false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Resolve(tc.desc, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				name := strings.Split(tc.want[i].Key, ":")[2]
				tc.want[i].Limit = p.Limit(name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestPolicy_Resolve_appendsToDst(t *testing.T) {
	p := mustParse(t, resolveYAML)
	dst := []Match{{Key: "earlier"}}
	got, err := p.Resolve(map[string]string{"api_key": "k"}, dst)
	if err != nil || len(got) != 2 || got[0].Key != "earlier" || got[1].Key != "weir:{k}:by-key:k" {
		t.Errorf("got %+v, %v", got, err)
	}
}

func TestPolicy_Resolve_unknownDescriptor(t *testing.T) {
	reject := mustParse(t, resolveYAML)
	desc := map[string]string{"tenant": "t", "zeta": "1", "beta": "2"}
	dst := []Match{{Key: "earlier"}}
	got, err := reject.Resolve(desc, dst)
	if !errors.Is(err, ErrUnknownDescriptor) || err.Error() != `policy: unknown descriptor "beta"` {
		t.Errorf("error = %v; want the smallest unknown name, wrapping ErrUnknownDescriptor", err)
	}
	if len(got) != 1 {
		t.Errorf("dst changed on error: %+v", got)
	}

	ignore := mustParse(t, "unknown_descriptors: ignore\n"+resolveYAML)
	got, err = ignore.Resolve(desc, nil)
	if err != nil || len(got) != 1 || got[0].Key != "weir:{t}:per-tenant:t" {
		t.Errorf("ignore: %+v, %v", got, err)
	}
}

func TestPolicy_Resolve_manyDescriptors(t *testing.T) {
	// More descriptor names than Resolve's stack buffer holds.
	var b strings.Builder
	b.WriteString("limits:\n")
	desc := map[string]string{}
	for i := range 40 {
		name := "d" + strings.Repeat("x", i)
		b.WriteString("  - {name: l" + name + ", match: [" + name + "], rate: 1/s, burst: 1}\n")
		desc[name] = "v"
	}
	p := mustParse(t, b.String())
	got, err := p.Resolve(desc, nil)
	if err != nil || len(got) != 40 || got[39].Key != "weir:{v}:ld"+strings.Repeat("x", 39)+":v" {
		t.Errorf("got %d matches (last %q), %v", len(got), got[len(got)-1].Key, err)
	}
}

func TestPolicy_Resolve_allocations(t *testing.T) {
	p := mustParse(t, resolveYAML)
	desc := map[string]string{"tenant": "acme", "user": "u:1", "route": "/x"}
	dst := make([]Match, 0, 8)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := p.Resolve(desc, dst[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 3 { // one per key
		t.Errorf("Resolve allocates %.1f times per call, want 3 (the keys)", allocs)
	}
}

func BenchmarkPolicy_Resolve(b *testing.B) {
	p := Builtin()
	desc := map[string]string{"tenant": "acme", "user": "user-12345", "route": "/v1/orders"}
	dst := make([]Match, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = p.Resolve(desc, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

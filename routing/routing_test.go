package routing_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/ring"
	"github.com/weirhq/weir/routing"
)

// twoGroups has limits grouped by tenant and by ip, one limit whose group
// is its second descriptor, and an Envoy-only limit that weir's API never
// matches.
const twoGroups = `version: "two-groups"
limits:
  - {name: per-user, match: [tenant, user], group: tenant, rate: 5/s, burst: 3}
  - {name: per-route, match: [route, tenant], group: tenant, rate: 5/s, burst: 3}
  - {name: per-ip, match: [ip], group: ip, rate: 5/s, burst: 3}
  - {name: per-ip-user, match: [user, ip], group: ip, rate: 5/s, burst: 3}
  - {name: edge, domain: edge, match: [remote_address], rate: 5/s, burst: 3}
`

func rules(p *policy.Policy) []routing.Rule {
	var out []routing.Rule
	for _, r := range p.GroupRules() {
		out = append(out, routing.Rule{Match: r.Match, Group: r.Group})
	}
	return out
}

// randomDesc draws descriptors over the names the policies use (and one
// they do not), with empty values and the bytes keys escape.
func randomDesc(rng *rand.Rand) map[string]string {
	values := []string{"", "a", "b", "acme", "x:y", "{t}", "100%", "é"}
	d := map[string]string{}
	for _, name := range []string{"tenant", "user", "route", "ip", "remote_address", "other"} {
		// Names a policy does not know fail the whole request where it
		// rejects them, so the last two are rare.
		if rng.IntN(2) == 0 && (name == "tenant" || name == "user" || name == "route" || name == "ip" || rng.IntN(8) == 0) {
			d[name] = values[rng.IntN(len(values))] + fmt.Sprint(rng.IntN(3))
			if rng.IntN(5) == 0 {
				d[name] = ""
			}
		}
	}
	return d
}

// TestTable_Owner_agreesWithResolveAndRing checks the client's view against
// the node's own: policy.Resolve gives the group, ring.Owner the owner.
func TestTable_Owner_agreesWithResolveAndRing(t *testing.T) {
	two, err := policy.Parse("two-groups", []byte(twoGroups))
	if err != nil {
		t.Fatal(err)
	}
	full, err := policy.LoadFile("../policy/testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ring.New(ring.DefaultConfig(), "n1", "n2", "n3", "n4")
	if err != nil {
		t.Fatal(err)
	}
	parts, _ := r.Partitions()
	for _, p := range []*policy.Policy{policy.Builtin(), two, full} {
		table, err := routing.NewTable(routing.Response(parts, nil, rules(p), p.Version))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		routed := 0
		for range 20000 {
			d := randomDesc(rng)
			ms, err := p.Resolve(d, nil)
			if err != nil || !oneGroup(ms) {
				continue // refused by the node whatever its owner
			}
			i, ok := table.Owner(d)
			if len(ms) == 0 {
				if ok {
					t.Fatalf("%s: %v matches no limit but routes to %s", p.Version, d, table.Name(i))
				}
				continue
			}
			want, _ := r.Owner(ms[0].GroupValue)
			if g, _ := table.Group(d); !ok || g != ms[0].GroupValue || table.Name(i) != want {
				t.Fatalf("%s: %v: table says group %q owner %v/%v, node says %q on %s",
					p.Version, d, g, ok, i, ms[0].GroupValue, want)
			}
			if gi, _ := table.GroupOwner(ms[0].GroupValue); table.Name(gi) != want {
				t.Fatalf("%s: GroupOwner(%q) = %s, node says %s", p.Version, ms[0].GroupValue, table.Name(gi), want)
			}
			routed++
		}
		if routed < 1000 {
			t.Errorf("%s: only %d of 20000 requests routed; the test draws too few matches", p.Version, routed)
		}
	}
}

func oneGroup(ms []policy.Match) bool {
	for _, m := range ms {
		if m.GroupValue != ms[0].GroupValue {
			return false
		}
	}
	return true
}

func TestResponse_publishesOnlyDialableAddresses(t *testing.T) {
	r, _ := ring.New(ring.DefaultConfig(), "a", "b", "c", "d")
	parts, _ := r.Partitions()
	addrs := map[string]string{"a": "10.0.0.1:8081", "b": "0.0.0.0:8081", "c": "[::]:8081"} // d: none
	resp := routing.Response(parts, addrs, nil, "v")
	table, err := routing.NewTable(resp)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"10.0.0.1:8081", "", "", ""} {
		if table.Address(i) != want {
			t.Errorf("member %s: address %q, want %q", table.Name(i), table.Address(i), want)
		}
	}
	if table.Epoch() != r.Epoch() || table.PolicyVersion() != "v" || table.Members() != 4 {
		t.Errorf("epoch %x (ring %x), policy %q, members %d", table.Epoch(), r.Epoch(), table.PolicyVersion(), table.Members())
	}
}

func TestNewTable_refusesBadAnswers(t *testing.T) {
	good := func() *weirv1.TopologyResponse {
		return &weirv1.TopologyResponse{
			RingEpoch: 7, Hash: routing.HashXX64, Owners: []uint32{0, 1, 0},
			Members:    []*weirv1.Member{{Name: "a"}, {Name: "b"}},
			GroupRules: []*weirv1.GroupRule{{Match: []string{"tenant"}, Group: "tenant"}},
		}
	}
	if _, err := routing.NewTable(good()); err != nil {
		t.Fatalf("good answer refused: %v", err)
	}
	tests := map[string]func(*weirv1.TopologyResponse){
		"unknown hash":       func(r *weirv1.TopologyResponse) { r.Hash = "md5" },
		"zero epoch":         func(r *weirv1.TopologyResponse) { r.RingEpoch = 0 },
		"owner out of range": func(r *weirv1.TopologyResponse) { r.Owners[2] = 2 },
		"group not matched":  func(r *weirv1.TopologyResponse) { r.GroupRules[0].Group = "user" },
		"too many members": func(r *weirv1.TopologyResponse) {
			r.Members = make([]*weirv1.Member, routing.MaxMembers+1)
		},
		"too many partitions": func(r *weirv1.TopologyResponse) { r.Owners = make([]uint32, routing.MaxPartitions+1) },
	}
	for name, change := range tests {
		resp := good()
		change(resp)
		if _, err := routing.NewTable(resp); !errors.Is(err, routing.ErrInvalidTopology) {
			t.Errorf("%s: err = %v, want ErrInvalidTopology", name, err)
		}
	}
}

func TestTable_Owner_emptyRing(t *testing.T) {
	table, err := routing.NewTable(&weirv1.TopologyResponse{RingEpoch: 1, Hash: routing.HashXX64,
		GroupRules: []*weirv1.GroupRule{{Match: []string{"tenant"}, Group: "tenant"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := table.Owner(map[string]string{"tenant": "acme"}); ok {
		t.Error("an empty ring routed a request")
	}
}

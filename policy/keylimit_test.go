package policy

import (
	"testing"

	"github.com/weirhq/weir/limitkey"
)

// builtinMatches resolves the built-in policy's first limit for values
// that need escaping in a key.
func builtinMatches(t *testing.T) (*Policy, []Match) {
	t.Helper()
	p := Builtin()
	l := p.Limits[0]
	desc := map[string]string{}
	for _, d := range l.Match {
		desc[d] = "a:b{c}%"
	}
	ms, err := p.Resolve(desc, nil)
	if err != nil || len(ms) == 0 {
		t.Fatalf("Resolve: %v, %d matches", err, len(ms))
	}
	return p, ms
}

func TestPolicy_LimitOfKey(t *testing.T) {
	p, ms := builtinMatches(t)
	l := p.Limits[0]
	for _, m := range ms {
		if got := p.LimitOfKey(m.Key); got != m.Limit {
			t.Errorf("LimitOfKey(%q) = %v, want %s", m.Key, got, m.Limit.Name)
		}
		if g, ok := limitkey.Group(m.Key); !ok || g != m.GroupValue {
			t.Errorf("limitkey.Group(%q) = %q, %v; want %q", m.Key, g, ok, m.GroupValue)
		}
	}
	for _, k := range []string{"", "weir:", "weir:{x}", "other:{x}:" + l.Name + ":x", "weir:{x}:nosuchlimit:x"} {
		if got := p.LimitOfKey(k); got != nil {
			t.Errorf("LimitOfKey(%q) = %s, want nil", k, got.Name)
		}
	}
}

// LimitOfKey runs for every key of every leasable request a non-owner
// decides: it must not allocate.
func TestPolicy_LimitOfKey_doesNotAllocate(t *testing.T) {
	p, ms := builtinMatches(t)
	key := ms[0].Key
	if allocs := testing.AllocsPerRun(100, func() { p.LimitOfKey(key) }); allocs != 0 {
		t.Errorf("LimitOfKey allocates %v times per call", allocs)
	}
}

// ParamsForKey runs for every key the owner validates: with a tenant it
// allocates only the one-element answer, the key's fields are cut in place.
func TestPolicy_ParamsForKey_allocations(t *testing.T) {
	p, err := Parse("test.yaml", []byte(keyPolicy))
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]float64{
		"weir:{acme}:per-user:acme:u1": 1, // the answer slice
		"weir:{r1}:per-route:r1":       0, // ambiguous: the policy's own set
		"weir:{x}:nope:x":              0,
	} {
		if got := testing.AllocsPerRun(100, func() { p.ParamsForKey(key) }); got != want {
			t.Errorf("ParamsForKey(%q) allocates %v times per call, want %v", key, got, want)
		}
	}
}

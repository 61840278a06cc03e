package decide

import (
	"testing"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
)

func TestRequest_Clone_ownsSlices(t *testing.T) {
	d := &Def{Name: "a"}
	r := Request{Group: "g", Keys: []string{"k"}, Limits: []gcra.Limit{{Interval: 1, Burst: 1}}, Defs: []*Def{d}, Cost: 1}
	c := r.Clone()
	c.Keys[0], c.Limits[0].Burst, c.Defs[0] = "x", 9, nil
	if r.Keys[0] != "k" || r.Limits[0].Burst != 1 || r.Defs[0] != d {
		t.Fatalf("clone shares slices with the original: %+v", r)
	}
}

func TestRequest_Def_missing(t *testing.T) {
	r := Request{Keys: []string{"a", "b"}, Defs: []*Def{{Name: "a"}}}
	if r.Def(0).Name != "a" || r.Def(1) != nil {
		t.Fatalf("Def(0) = %v, Def(1) = %v", r.Def(0), r.Def(1))
	}
}

func TestDef_Leasable(t *testing.T) {
	terms := &lease.Terms{Max: 1, TTL: 1}
	for _, tc := range []struct {
		d    *Def
		want bool
	}{
		{nil, false}, {&Def{}, false}, {&Def{Lease: terms}, true},
		{&Def{Lease: terms, Shadow: true}, false}, {&Def{Lease: terms, Strict: true}, false},
	} {
		if got := tc.d.Leasable(); got != tc.want {
			t.Errorf("%+v.Leasable() = %v, want %v", tc.d, got, tc.want)
		}
	}
}

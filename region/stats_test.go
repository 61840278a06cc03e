package region

import (
	"slices"
	"testing"
)

func TestStats(t *testing.T) {
	cfg := testConfig()
	keys := keysHomedIn(t, cfg, "eu", 2)
	k1, k2 := keys[0], keys[1]
	label := func(string) string { return "tenant" }
	h, _ := NewHome(cfg, "eu", 0)
	now := 5 * sec
	eu := newTestMember(t, "eu")
	reps, _ := eu.Reports(now, map[string]float64{k1: 2, k2: 1})
	rep, err := h.Handle(now, reps[0])
	if err != nil {
		t.Fatal(err)
	}
	eu.Apply(now, rep)
	mustHandle(t, h, now, report("us", 1, "eu", k1, 0.5, 0))

	ms := eu.Stats(now, label)["tenant"]
	if ms.Keys != 2 || ms.AtFloor != 0 || ms.Share != rep.Grants[0].Share+rep.Grants[1].Share {
		t.Fatalf("member stats %+v, grants %+v", ms, rep.Grants)
	}
	if ms := eu.Stats(now+cfg.ttl(), label)["tenant"]; ms.AtFloor != 2 || ms.Share != 2*cfg.Floor {
		t.Fatalf("member stats after expiry %+v", ms)
	}

	hs := h.Stats(now, label)["tenant"]
	if hs.Keys != 2 || hs.Demand["eu"] != 3 || hs.Demand["us"] != 0.5 || len(hs.Silent) != 0 {
		t.Fatalf("home stats %+v", hs)
	}
	if hs.Reserved["eu"]+hs.Reserved["us"] != h.Reserved(k1, now)+h.Reserved(k2, now) {
		t.Fatalf("home stats reserved %v", hs.Reserved)
	}
	if hs := h.Stats(now+cfg.ttl()+1, label)["tenant"]; !slices.Equal(hs.Silent, []string{"eu", "us"}) {
		t.Fatalf("silent regions %v", hs.Silent)
	}
}

package history

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	var ops, events bytes.Buffer
	w := NewWriter(&events)
	hdr := Header{Scenario: "s", Nodes: []string{"n1"}, Deadline: time.Second,
		Limits: []LimitSpec{{Name: "a", Interval: 100 * time.Millisecond, Burst: 5}}}
	if err := w.Header(hdr); err != nil {
		t.Fatal(err)
	}
	w.Event(Event{Time: 5, Kind: FaultStart, ID: 1, Fault: "kill", Nodes: []string{"n1"}, Crash: true})
	leases := LeaseCounts{Granted: 9, Received: 9, Spent: 4, Stranded: 1, RefusedDecisions: 3}
	w.Event(Event{Time: 50, Kind: Leases, Leases: map[string]LeaseCounts{"a": leases}})
	w.Flush()
	ow := NewWriter(&ops)
	ow.Op(Op{ID: 2, Invoke: 20, Complete: 30, Outcome: Denied, Cost: 1, Limits: []LimitKey{{Name: "a", Key: "k"}}})
	ow.Op(Op{ID: 1, Invoke: 10, Complete: 40, Outcome: Allowed, Cost: 1, FallbackMode: "local"})
	ow.Flush()
	h, err := Read(&events, &ops)
	if err != nil {
		t.Fatal(err)
	}
	if h.Header.Scenario != "s" || len(h.Ops) != 2 || len(h.Events) != 2 {
		t.Fatalf("got %+v", h)
	}
	if h.Ops[0].ID != 1 || !h.Ops[0].Fallback() || h.Ops[0].Latency() != 30 {
		t.Fatalf("ops not sorted by invoke or fields lost: %+v", h.Ops)
	}
	if !h.Events[0].Crash {
		t.Fatal("crash flag lost")
	}
	if got := h.Events[1].Leases["a"]; h.Events[1].Kind != Leases || got != leases {
		t.Fatalf("lease counters lost: %+v", h.Events[1])
	}
	if sum := leases.Add(leases); sum.Granted != 18 || sum.Spent != 8 || sum.RefusedDecisions != 6 || leases.Held() != 9-4-1 {
		t.Fatalf("Add %+v Held %d", sum, leases.Held())
	}
	if b := hdr.Limits[0].Bound(time.Second); b != 15 {
		t.Fatalf("bound = %v, want 15", b)
	}
}

func TestReadRejectsBadInput(t *testing.T) {
	hdr := `{"header":{"scenario":"s","limits":[{"name":"a","interval":1,"burst":1}]}}` + "\n"
	for name, in := range map[string]string{
		"no header":   `{"op":{"id":1,"outcome":"allowed"}}` + "\n",
		"two headers": hdr + hdr,
		"bad outcome": hdr + `{"op":{"id":1,"outcome":"maybe"}}` + "\n",
		"bad middle":  hdr + "{nope\n" + `{"op":{"id":1,"outcome":"allowed"}}` + "\n",
		"empty rec":   hdr + "{}\n",
		"no limits":   `{"header":{"scenario":"s"}}` + "\n",
	} {
		if _, err := Read(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// A run killed mid-write leaves a cut last line: the prefix still reads.
	h, err := Read(strings.NewReader(hdr + `{"op":{"id":1,"outcome":"allowed"}}` + "\n" + `{"op":{"id":2,"out`))
	if err != nil || len(h.Ops) != 1 {
		t.Fatalf("truncated tail: %v %+v", err, h)
	}
}

func TestLimitSpec_FallbackParams(t *testing.T) {
	for _, tc := range []struct {
		spec    LimitSpec
		members int
		t       time.Duration
		b       int64
	}{
		// The hot limit: 100/s burst 10, its share of three nodes.
		{LimitSpec{Interval: 10 * time.Millisecond, Burst: 10, FallbackShare: true}, 3, time.Second / 34, 4},
		{LimitSpec{Interval: 10 * time.Millisecond, Burst: 10, FallbackShare: true}, 1, 10 * time.Millisecond, 10},
		{LimitSpec{Interval: 10 * time.Millisecond, Burst: 10, FallbackShare: true}, 0, 10 * time.Millisecond, 10},
		// Rounded up in the policy's own unit: 5/m over 2 members is 3/m.
		{LimitSpec{Interval: 12 * time.Second, Burst: 3, FallbackShare: true, RatePer: time.Minute}, 2, 20 * time.Second, 2},
		// 2/s over 3 members is 1/s, never less than one unit per RatePer.
		{LimitSpec{Interval: 500 * time.Millisecond, Burst: 30, FallbackShare: true}, 3, time.Second, 10},
		// An explicit fallback does not depend on the members.
		{LimitSpec{Interval: time.Second, Burst: 5, FallbackInterval: time.Second, FallbackBurst: 2}, 3, time.Second, 2},
	} {
		gt, gb := tc.spec.FallbackParams(tc.members)
		if gt != tc.t || gb != tc.b {
			t.Errorf("%+v with %d members: %s burst %d, want %s burst %d", tc.spec, tc.members, gt, gb, tc.t, tc.b)
		}
	}
	if got := (LimitSpec{Interval: 10 * time.Millisecond, Burst: 10, FallbackShare: true}).FallbackBoundFor(5*time.Second, 3); got != 4+5*34 {
		t.Errorf("5s fallback bound at N=3 = %v, want 174", got)
	}
}

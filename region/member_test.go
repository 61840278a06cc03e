package region

import (
	"errors"
	"math"
	"testing"
)

func newTestMember(t *testing.T, region string) *Member {
	t.Helper()
	m, err := NewMember(testConfig(), region, region+"#1", 0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func reply(r Report, share Share) Reply {
	rep := Reply{Home: r.Home, To: r.From, Reporter: r.Reporter, Seq: r.Seq}
	for _, it := range r.Items {
		rep.Grants = append(rep.Grants, Grant{Key: it.Key, Share: share, TTL: testConfig().ttl()})
	}
	return rep
}

// A grant lasts TTL from when the report was sent, not from when the
// reply arrived; then the key is back at its floor.
func TestMember_Apply_countsFromSend(t *testing.T) {
	m := newTestMember(t, "eu")
	cfg := testConfig()
	reps, err := m.Reports(0, map[string]float64{"k": 0.5})
	if err != nil || len(reps) != 1 {
		t.Fatalf("Reports = %v, %v", reps, err)
	}
	if !m.AtFloor("k", 0) || m.Share("k", 0) != cfg.Floor {
		t.Fatal("a key never granted is not at its floor")
	}
	if n, err := m.Apply(sec, reply(reps[0], 600_000)); n != 1 || err != nil {
		t.Fatalf("Apply = %d, %v", n, err)
	}
	if got := m.Share("k", cfg.ttl()-1); got != 600_000 {
		t.Fatalf("1ns before TTL after sending: share %d", got)
	}
	if got := m.Share("k", cfg.ttl()); got != cfg.Floor || !m.AtFloor("k", cfg.ttl()) {
		t.Fatalf("TTL after sending: share %d, want the floor", got)
	}
}

func TestMember_Apply_ignoresStaleReplies(t *testing.T) {
	m := newTestMember(t, "eu")
	r1, _ := m.Reports(0, map[string]float64{"k": 0.5})
	r2, _ := m.Reports(100*us, map[string]float64{"k": 0.5})
	if n, _ := m.Apply(200*us, reply(r2[0], 300_000)); n != 1 {
		t.Fatal("newer grant not applied")
	}
	if n, _ := m.Apply(300*us, reply(r1[0], 900_000)); n != 0 || m.Share("k", 300*us) != 300_000 {
		t.Fatalf("an older grant arriving late was applied: share %d", m.Share("k", 300*us))
	}
	if n, _ := m.Apply(300*us, reply(r2[0], 900_000)); n != 0 {
		t.Fatal("a duplicate reply was applied")
	}
	unknown := reply(r2[0], 900_000)
	unknown.Seq = 99
	if n, _ := m.Apply(300*us, unknown); n != 0 {
		t.Fatal("a reply to a report never sent was applied")
	}
	r3, _ := m.Reports(400*us, map[string]float64{"k": 0.5})
	if r3[0].Items[0].Ack != r2[0].Seq {
		t.Fatalf("ack %d, want %d", r3[0].Items[0].Ack, r2[0].Seq)
	}
	late := testConfig().ttl() + 400*us
	if n, _ := m.Apply(late, reply(r3[0], 900_000)); n != 0 {
		t.Fatal("a grant that expired on the way was applied")
	}
	wrong := reply(r3[0], 900_000)
	wrong.To = "us"
	if _, err := m.Apply(500*us, wrong); !errors.Is(err, ErrInvalidReport) {
		t.Fatalf("misaddressed reply: error %v", err)
	}
}

// One report per home; keys holding a live grant are reported even with no
// demand, so their home can shrink them; bad demand changes nothing.
func TestMember_Reports(t *testing.T) {
	m := newTestMember(t, "eu")
	cfg := testConfig()
	kEU, kUS := keyHomedIn(t, cfg, "eu"), keyHomedIn(t, cfg, "us")
	reps, _ := m.Reports(0, map[string]float64{kEU: 0.2, kUS: 0.3, "idle": 0})
	if len(reps) != 2 || reps[0].Home != "eu" || reps[1].Home != "us" || len(reps[0].Items) != 1 || len(reps[1].Items) != 1 {
		t.Fatalf("reports %+v", reps)
	}
	m.Apply(1*us, reply(reps[0], 500_000))
	if _, err := m.Reports(2*us, map[string]float64{kEU: math.NaN()}); !errors.Is(err, ErrInvalidReport) {
		t.Fatalf("NaN demand: error %v", err)
	}
	reps, _ = m.Reports(3*us, nil)
	if len(reps) != 1 || reps[0].Items[0].Key != kEU || reps[0].Items[0].Demand != 0 || reps[0].Seq != 3 {
		t.Fatalf("reports with no demand: %+v", reps)
	}
}

func TestNewMember_validates(t *testing.T) {
	if _, err := NewMember(testConfig(), "ap", "ap#1", 0); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("unknown region: %v", err)
	}
	if _, err := NewMember(testConfig(), "eu", "", 0); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("no reporter: %v", err)
	}
}

package writebehind_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A full backlog drops rested marks silently (nothing is lost: Redis's
// older value is rested too) and refuses live ones with a count, so while
// Redis is away the backlog's memory stays bounded.
func TestWriter_MaxBacklog(t *testing.T) {
	cfg := testConfig()
	cfg.MaxBacklog = 256 // two keys per shard
	now := newFakeNow(1_000_000)
	reg := prometheus.NewRegistry()
	w := newWriter(t, cfg, newFakeSink(), now.Now, reg)
	full := func() float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "weir_writebehind_backlog_full_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("weir_writebehind_backlog_full_total is not registered")
		return 0
	}
	for i := range 10_000 {
		w.Mark(fmt.Sprint("rested", i), 500_000)
	}
	if p := w.Pending(); p > 256 || p == 0 {
		t.Fatalf("pending %d after rested marks, want 1..256", p)
	}
	if got := full(); got != 0 {
		t.Fatalf("rested marks counted as lost: %v", got)
	}
	for i := range 10_000 {
		w.Mark(fmt.Sprint("live", i), 2_000_000)
	}
	if p := w.Pending(); p > 256 {
		t.Fatalf("pending %d, over the bound of 256", p)
	}
	// Every live mark is either in the backlog or counted.
	if got := full(); int(got)+w.Pending() != 10_000 {
		t.Fatalf("%v counted + %d pending != 10000 live marks", got, w.Pending())
	}
}

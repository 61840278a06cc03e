package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/chaos/checker"
	"github.com/weirhq/weir/chaos/history"
)

// TestJudgeLatency_deadlineIsTheCeiling: a forward may wait for a slow
// owner until the caller's deadline less a reserve, so a healthy phase
// whose callers were answered after 200 ms of a 250 ms deadline passes;
// an explicit ceiling in the checker configuration is kept and judged.
func TestJudgeLatency_deadlineIsTheCeiling(t *testing.T) {
	const deadline = 250 * time.Millisecond
	t0 := int64(1_700_000_000) * int64(time.Second)
	h := &history.History{Header: history.Header{
		Scenario: "latency", Nodes: []string{"n1"}, Deadline: deadline, Start: t0,
		Limits: []history.LimitSpec{{Name: "l", Interval: time.Second, Burst: 1000, Consistency: "fast", OnFailure: "local",
			FallbackInterval: time.Second, FallbackBurst: 1}},
	}}
	for i := range 200 {
		inv := t0 + int64(i)*int64(10*time.Millisecond)
		h.Ops = append(h.Ops, history.Op{ID: int64(i), Node: "n1", Invoke: inv, Complete: inv + int64(200*time.Millisecond),
			Limits: []history.LimitKey{{Name: "l", Key: "k", Denied: true}}, Cost: 1, Outcome: history.Denied})
	}

	cfg := judgeLatency(CheckerConfig(), deadline)
	if cfg.MaxP99 != deadline {
		t.Fatalf("MaxP99 = %s, want the deadline %s", cfg.MaxP99, deadline)
	}
	if r := checker.Check(h, cfg); !r.OK() {
		t.Errorf("answers at 200ms of a 250ms deadline failed: %v", r.Violations)
	}

	own := CheckerConfig()
	own.MaxP99 = 100 * time.Millisecond
	cfg = judgeLatency(own, deadline)
	if cfg.MaxP99 != 100*time.Millisecond {
		t.Fatalf("an explicit ceiling was replaced: MaxP99 = %s", cfg.MaxP99)
	}
	r := checker.Check(h, cfg)
	if r.OK() || !strings.Contains(strings.Join(r.Violations, "\n"), "p99") {
		t.Errorf("a 100ms ceiling passed answers at 200ms: %v", r.Violations)
	}
}

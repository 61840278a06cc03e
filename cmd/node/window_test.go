package main

import (
	"testing"
	"time"
)

// TestWindowExcess_callAnsweredLate checks the failover tests' judge on
// runs whose node stamps are known. Burst 2, one unit every 10ms.
func TestWindowExcess_callAnsweredLate(t *testing.T) {
	const T, B = 10 * time.Millisecond, 2
	t0 := time.Unix(1000, 0)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	call := func(sent, recv float64) op { return op{sent: at(sent), recv: at(recv), allowed: true} }
	cases := []struct {
		name  string
		ops   []op
		slack time.Duration
		want  int
	}{
		// Three workers: calls 0 and 2 take the burst at once; call 1, sent
		// between them, waits in the node and is stamped at 12ms, after a
		// unit refilled. The node admitted 3 within [0.5ms, 12ms]: within
		// the bound, though three calls were sent before call 2's answer.
		{"sent between, answered after", []op{call(0, 1), call(0.1, 13), call(0.2, 0.8)}, 0, 0},
		// Three calls sure to be stamped within 1ms: one too many.
		{"three within a millisecond", []op{call(0, 1), call(0.1, 0.9), call(0.2, 0.8)}, 0, 1},
		// The third unit of a window of 9.5ms is the excess; a slack of
		// the node's clock steps (here 0.5ms) makes it one refill.
		{"refill only with slack", []op{call(0, 1), call(0.1, 1), call(9, 9.5)}, 0, 1},
		{"refill with slack", []op{call(0, 1), call(0.1, 1), call(9, 9.5)}, 500 * time.Microsecond, 0},
		// Denials count for nothing.
		{"denials", []op{call(0, 1), {sent: at(0.1), recv: at(0.2)}, call(0.3, 0.9)}, 0, 0},
	}
	for _, c := range cases {
		if got := windowExcess(c.ops, T, B, c.slack); got != c.want {
			t.Errorf("%s: excess %d, want %d", c.name, got, c.want)
		}
	}
}

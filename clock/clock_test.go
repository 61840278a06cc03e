package clock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
)

func TestReal_Now_keepsMonotonicReading(t *testing.T) {
	if s := clock.Real().Now().String(); !strings.Contains(s, "m=") {
		t.Fatalf("Real().Now() = %s, has no monotonic reading", s)
	}
}

func TestReal_NewTimer_fires(t *testing.T) {
	clk := clock.Real()
	start := clk.Now()
	tm := clk.NewTimer(time.Millisecond)
	got := <-tm.C()
	if got.Before(start.Add(time.Millisecond)) {
		t.Fatalf("fired at %s, before the deadline %s", got, start.Add(time.Millisecond))
	}
	if clk.Since(start) < time.Millisecond {
		t.Fatalf("Since(start) = %s after the timer fired", clk.Since(start))
	}
	if tm.Stop() {
		t.Fatal("Stop after the value was received = true")
	}
	if tm.Reset(time.Hour) {
		t.Fatal("Reset of a fired timer = true")
	}
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer = false")
	}
}

func TestReal_NewTicker_ticks(t *testing.T) {
	tk := clock.Real().NewTicker(time.Millisecond)
	defer tk.Stop()
	<-tk.C()
	tk.Reset(2 * time.Millisecond)
	<-tk.C()
}

package main

import (
	"sync/atomic"
	"testing"
	"time"
)

// A reload in progress never blocks the caller (the signal loop), and the
// requests made meanwhile coalesce into one more reload.
func TestReloader_neverBlocksAndCoalesces(t *testing.T) {
	started, release := make(chan struct{}, 10), make(chan struct{})
	var runs atomic.Int32
	r := startReloader(func() {
		runs.Add(1)
		started <- struct{}{}
		<-release
	})
	r.request()
	<-started // the first reload is running and blocked
	begin := time.Now()
	for range 5 {
		r.request()
	}
	if took := time.Since(begin); took > 100*time.Millisecond {
		t.Fatalf("requests during a reload took %v", took)
	}
	close(release)
	<-started // the one queued reload
	r.stop()
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatal("reloader did not stop")
	}
	if got := runs.Load(); got != 2 {
		t.Fatalf("%d reloads, want 2 (the running one and one coalesced)", got)
	}
}

package main

import (
	"sync/atomic"
	"testing"
	"time"
)

// A reload in progress never blocks the caller (the signal loop), and the
// requests made meanwhile coalesce into one more reload. The requests must
// all return while the first reload is still held: a request that waited
// for it would wait until the release, which comes only after them, so the
// guard below is reached only by a blocked request, never by a slow machine.
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
	requested := make(chan struct{})
	go func() {
		defer close(requested)
		for range 5 {
			r.request()
		}
	}()
	select {
	case <-requested:
	case <-time.After(10 * time.Second):
		close(release) // let the reloader and the requests go
		t.Fatal("requests made during a reload waited for it to finish")
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

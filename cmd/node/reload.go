package main

// reloader runs policy reloads on its own goroutine, so the signal loop in
// run never waits for one: a SIGTERM that arrives while a large policy is
// being parsed starts the hand-off at once. Reloads run one at a time; a
// request made while one runs queues exactly one more (the file is read
// afresh then, so further requests would change nothing).
type reloader struct {
	requests chan struct{}
	done     chan struct{}
}

// startReloader starts the goroutine that calls reload on request.
func startReloader(reload func()) *reloader {
	r := &reloader{requests: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for range r.requests {
			reload()
		}
	}()
	return r
}

// request asks for a reload and returns at once.
func (r *reloader) request() {
	select {
	case r.requests <- struct{}{}:
	default: // one is already queued
	}
}

// stop ends the goroutine after the reload in progress, if any, without
// waiting for it; done closes when it has ended. Call request no more.
func (r *reloader) stop() { close(r.requests) }

package redisbackend

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// blockingPipeliner holds every pipeline until release closes.
type blockingPipeliner struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingPipeliner) DecidePipelined(ctx context.Context, reqs []DecideRequest) ([]Decision, []error, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return make([]Decision, len(reqs)), nil, nil
}

// While Redis is slow, at most strictQueueBatches pipelines' worth of
// decisions wait; the next fails at once instead of joining them.
func TestStrictQueue_boundedWhileRedisIsSlow(t *testing.T) {
	b := &blockingPipeliner{entered: make(chan struct{}, 1), release: make(chan struct{})}
	q, err := NewStrictQueue(b, time.Second, 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(b.release)
	wg.Go(func() { _, _ = q.Decide(ctx, DecideRequest{}) })
	<-b.entered // the sender holds one pipeline in flight
	limit := strictQueueBatches * 2
	for range limit {
		wg.Go(func() { _, _ = q.Decide(ctx, DecideRequest{}) })
	}
	for queued := 0; queued != limit; { // wait for every caller to queue
		q.mu.Lock()
		queued = len(q.mu.queue)
		q.mu.Unlock()
		runtime.Gosched()
	}
	start := time.Now()
	if _, err := q.Decide(ctx, DecideRequest{}); !errors.Is(err, ErrStrictQueueFull) {
		t.Fatalf("err = %v, want ErrStrictQueueFull", err)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("refusal took %v", took)
	}
}

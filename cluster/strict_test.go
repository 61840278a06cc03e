package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/redisbackend"
)

// blockingPipeliner holds every pipeline until release closes.
type blockingPipeliner struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingPipeliner) DecidePipelined(ctx context.Context, reqs []redisbackend.DecideRequest) ([]redisbackend.Decision, []error, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return make([]redisbackend.Decision, len(reqs)), nil, nil
}

// While Redis is slow, at most strictQueueBatches pipelines' worth of
// decisions wait; the next fails at once instead of joining them.
func TestStrictQueue_boundedWhileRedisIsSlow(t *testing.T) {
	b := &blockingPipeliner{entered: make(chan struct{}, 1), release: make(chan struct{})}
	q := newStrictQueue(b, time.Second, 2)
	ctx := t.Context()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(b.release)
	wg.Go(func() { _, _ = q.do(ctx, redisbackend.DecideRequest{}) })
	<-b.entered // the sender holds one pipeline in flight
	limit := strictQueueBatches * 2
	for range limit {
		wg.Go(func() { _, _ = q.do(ctx, redisbackend.DecideRequest{}) })
	}
	waitFor(t, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.mu.queue) == limit
	})
	start := time.Now()
	if _, err := q.do(ctx, redisbackend.DecideRequest{}); !errors.Is(err, errStrictQueueFull) {
		t.Fatalf("err = %v, want errStrictQueueFull", err)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("refusal took %v", took)
	}
}

package writebehind

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/redisbackend"
)

// errNoClock is returned by a store when now() is not positive, which the
// Sink would reject; the TATs stay pending.
var errNoClock = errors.New("writebehind: clock returned a non-positive time")

// Run flushes every FlushInterval until ctx is done, backing off
// exponentially (from FlushInterval up to MaxBackoff) while the Sink fails;
// failed TATs stay pending and are retried. A flush that finds nothing
// pending sleeps until the next Mark instead, which is then flushed
// FlushInterval later, as any mark is: an idle node wakes for nothing.
// When ctx is done it makes one final best-effort flush bounded by Timeout
// and returns its error, or nil. Run blocks; start it in its own goroutine.
func (w *Writer) Run(ctx context.Context) error {
	timer := w.clk.NewTimer(w.cfg.FlushInterval)
	defer timer.Stop()
	var delay time.Duration // the current backoff; 0 while healthy
	for {
		select {
		case <-ctx.Done():
			return w.finalFlush(ctx)
		case <-timer.C():
		}
		if err := w.flushOnce(ctx, nil); err != nil && ctx.Err() == nil {
			delay = w.nextBackoff(delay)
			timer.Reset(delay)
			continue
		}
		delay = 0
		if !w.sleepWhileIdle(ctx) {
			return w.finalFlush(ctx)
		}
		timer.Reset(w.cfg.FlushInterval)
	}
}

// sleepWhileIdle waits for a Mark while nothing is pending, and returns at
// once otherwise; false when ctx ended first. Marks check idle after
// adding their key, and Pending reads the shards after idle is set, so a
// mark made meanwhile is either seen here or wakes the sleep.
func (w *Writer) sleepWhileIdle(ctx context.Context) bool {
	if w.Pending() > 0 {
		return true
	}
	w.idle.Store(true)
	defer w.idle.Store(false)
	if w.Pending() > 0 {
		return true
	}
	select {
	case <-w.wake:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *Writer) finalFlush(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Timeout)
	defer cancel()
	if err := w.flushOnce(ctx, nil); err != nil {
		w.logger.Warn("write-behind final flush failed; pending TATs are lost", "pending", w.Pending(), "err", err)
		return fmt.Errorf("writebehind: final flush: %w", err)
	}
	return nil
}

func (w *Writer) nextBackoff(d time.Duration) time.Duration {
	if d == 0 {
		return w.cfg.FlushInterval
	}
	return min(2*d, w.cfg.MaxBackoff)
}

// Flush stores every pending TAT, retrying with backoff until a pass
// succeeds or ctx ends. TATs marked while it runs may or may not be
// included. Use it on leave and shutdown, with a deadline. On failure the
// error wraps ctx's error and the last Sink error, and the TATs stay
// pending.
func (w *Writer) Flush(ctx context.Context) error {
	return w.flushUntil(ctx, nil)
}

// FlushKeys stores the pending TATs of the keys for which match is true,
// retrying with backoff until they are stored or ctx ends, and leaves other
// keys pending. Use it to hand groups off: stop marking their keys first,
// then FlushKeys, then let the new owner load them. match is called with
// a shard lock held: it must be fast and must not call the Writer.
func (w *Writer) FlushKeys(ctx context.Context, match func(key string) bool) error {
	if match == nil {
		return errors.New("writebehind: FlushKeys needs a match function")
	}
	return w.flushUntil(ctx, match)
}

func (w *Writer) flushUntil(ctx context.Context, match func(string) bool) error {
	var delay time.Duration
	for {
		err := w.flushOnce(ctx, match)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			if errors.Is(err, ctx.Err()) {
				return fmt.Errorf("writebehind: flush: %w", err)
			}
			return fmt.Errorf("writebehind: flush: %w", errors.Join(ctx.Err(), err))
		}
		delay = w.nextBackoff(delay)
		t := w.clk.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("writebehind: flush: %w", errors.Join(ctx.Err(), err))
		case <-t.C():
		}
	}
}

// flushOnce makes one pass over the shards, taking the entries match
// accepts (all if nil) and storing them in batches of MaxBatch. It stops at
// the first failed batch, putting that batch and everything taken after it
// back; shards not reached yet keep their entries.
func (w *Writer) flushOnce(ctx context.Context, match func(string) bool) error {
	// A free slot is taken even when ctx has ended: a flush that finds
	// nothing to store then succeeds (a node's last ring change, after its
	// hand-off, flushes with the ended context of its shutdown).
	select {
	case w.sem <- struct{}{}:
	default:
		select {
		case w.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() { <-w.sem }()
	buf, sinces := w.buf[:0], w.sinces[:0]
	defer func() {
		clear(buf[:cap(buf)]) // drop key references
		w.buf, w.sinces = buf[:0], sinces[:0]
		w.inflight.Store(0)
		w.inflightSince.Store(0)
	}()
	for i := range w.shards {
		var since int64
		buf, sinces, since = w.shards[i].take(buf, sinces, match)
		w.inflight.Store(int64(len(buf)))
		if old := w.inflightSince.Load(); since != 0 && (old == 0 || since < old) {
			w.inflightSince.Store(since)
		}
		last := i == numShards-1
		if len(buf) < w.cfg.MaxBatch && !last {
			continue
		}
		n, err := w.sendBatches(ctx, buf, sinces, last)
		if err != nil {
			return err
		}
		buf, sinces = buf[:n], sinces[:n]
		w.inflight.Store(int64(n))
	}
	return nil
}

// sendBatches stores buf in batches of MaxBatch from the front; with all
// it also sends a final short batch. It moves what it did not send to the
// front and returns its length. On failure it puts back every unsent TAT
// and returns the error.
func (w *Writer) sendBatches(ctx context.Context, buf []redisbackend.TAT, sinces []int64, all bool) (int, error) {
	sent := 0
	for len(buf)-sent >= w.cfg.MaxBatch || (all && sent < len(buf)) {
		end := min(sent+w.cfg.MaxBatch, len(buf))
		if err := w.store(ctx, buf[sent:end]); err != nil {
			w.putBack(buf[sent:], sinces[sent:])
			return 0, err
		}
		sent = end
	}
	n := copy(buf, buf[sent:])
	copy(sinces, sinces[sent:])
	clear(buf[n:])
	return n, nil
}

// store sends one batch, stamped with now(), bounded by Timeout.
func (w *Writer) store(ctx context.Context, batch []redisbackend.TAT) error {
	now := w.now()
	if now <= 0 {
		w.noteResult(len(batch), errNoClock)
		return errNoClock
	}
	for i := range batch {
		batch[i].Now = now
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	err := w.sink.StoreTATs(ctx, batch)
	cancel()
	w.m.commands.Add(float64(len(batch))) // one SET or DEL per TAT, sent even if the call failed
	w.noteResult(len(batch), err)
	return err
}

// noteResult counts a batch and logs transitions between failing and
// healthy. The caller holds sem.
func (w *Writer) noteResult(n int, err error) {
	if err != nil {
		w.m.flushErr.Inc()
		if !w.failing {
			w.failing = true
			w.logger.Warn("write-behind store failing; TATs kept and retried", "batch", n, "err", err)
		}
		return
	}
	w.m.flushOK.Inc()
	w.m.written.Add(float64(n))
	if w.failing {
		w.failing = false
		w.logger.Info("write-behind store recovered", "pending", w.Pending())
	}
}

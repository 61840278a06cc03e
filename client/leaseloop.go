package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/lease"
)

// Reconnection backoff of the lease stream, and how many refreshes in a
// row may go unanswered before the stream is replaced.
const (
	minLeaseBackoff  = 50 * time.Millisecond
	maxLeaseBackoff  = 5 * time.Second
	maxLeaseTimeouts = 3
	leaseSweepEvery  = time.Second
)

// errLeasesUnsupported ends leasing against a node without weir.v1.Leases.
var errLeasesUnsupported = errors.New("client: the node does not serve weir.v1.Leases")

// shutdown asks the loop to return the units held and end, and waits for
// it until ctx ends.
func (l *leaser) shutdown(ctx context.Context) {
	l.stopped.Do(func() { close(l.quit) })
	select {
	case <-l.done:
	case <-ctx.Done():
	}
}

// run keeps a lease stream open to Target until shutdown, opening a new
// one (with a new holder) after a failure, with backoff.
func (l *leaser) run() {
	defer close(l.done)
	backoff := minLeaseBackoff
	for {
		began := l.clk.Now()
		err := l.session()
		if err == nil {
			return // shut down
		}
		if errors.Is(err, errLeasesUnsupported) {
			backoff = maxLeaseBackoff
		} else if l.clk.Since(began) > maxLeaseBackoff {
			backoff = minLeaseBackoff // it served a while: a fresh failure
		}
		t := l.clk.NewTimer(backoff)
		select {
		case <-l.quit:
			t.Stop()
			return
		case <-t.C():
		}
		backoff = min(2*backoff, maxLeaseBackoff)
	}
}

// stream is one open Hold stream and the answers read from it.
type stream struct {
	s      weirv1.Leases_HoldClient
	answer chan *weirv1.HoldResponse
	failed chan error // buffered 1
	seq    uint64
	misses int // refreshes in a row without an answer
}

// session opens a stream, exchanges on it every Tick and when asked, and
// returns nil after shutdown (having returned the units held) or the
// error that broke the stream.
func (l *leaser) session() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hs, err := l.rpc.Hold(ctx)
	if err != nil {
		return err
	}
	st := &stream{s: hs, answer: make(chan *weirv1.HoldResponse, 1), failed: make(chan error, 1)}
	go st.read(ctx)
	h, err := lease.NewHolder(l.holderConfig())
	if err != nil {
		return err
	}
	l.opens.Add(1)
	l.mu.Lock()
	l.h = h
	l.up.Store(true)
	l.mu.Unlock()
	defer l.teardown()
	tick := l.clk.NewTicker(l.cfg.Tick)
	defer tick.Stop()
	for {
		probe := false
		select {
		case <-l.quit:
			l.returnAll(st)
			return nil
		case err := <-st.failed:
			return err
		case <-tick.C():
		case <-l.kick:
			probe = true
		}
		if err := l.exchange(st, probe); err != nil {
			return err
		}
	}
}

func (l *leaser) holderConfig() lease.HolderConfig {
	h := l.cfg.Holder
	h.Name = "client" // the node names the holder; this never travels
	return h
}

// read delivers the stream's answers until it fails.
func (st *stream) read(ctx context.Context) {
	for {
		resp, err := st.s.Recv()
		if err != nil {
			if status.Code(err) == codes.Unimplemented {
				err = fmt.Errorf("%w: %w", errLeasesUnsupported, err)
			}
			st.failed <- err
			return
		}
		select {
		case st.answer <- resp:
		case <-ctx.Done():
			return
		}
	}
}

// teardown forgets the holder of a stream that ended: its units strand at
// their owners until their leases expire, and decisions go over Decide
// until a new stream is open.
func (l *leaser) teardown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up.Store(false)
	l.h = nil
	l.wakeLocked()
	for _, e := range l.entries {
		if e.state == looking {
			e.queued = false // resent on the next stream
		}
	}
	l.pending = l.pending[:0]
	for _, e := range l.entries {
		if e.state == looking {
			l.queueLocked(e)
		}
	}
}

func (l *leaser) wakeLocked() {
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// exchange sends one request (the due refresh, or a probe, and queued
// lookups) and applies its answer. It returns an error only when the
// stream is no longer usable.
func (l *leaser) exchange(st *stream, probe bool) error {
	l.mu.Lock()
	req, r, ok, lookups := l.buildLocked(st, probe)
	if req == nil {
		l.wakeLocked()
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	l.leaseRPCs.Add(1)
	if err := st.s.Send(req); err != nil {
		l.giveUp(r, ok, lookups)
		return err
	}
	t := l.clk.NewTimer(l.cfg.RefreshTimeout)
	defer t.Stop()
	for {
		select {
		case resp := <-st.answer:
			if resp.GetSeq() != req.GetSeq() {
				continue // the answer to a request given up on
			}
			st.misses = 0
			return l.apply(resp, r, ok, lookups)
		case err := <-st.failed:
			l.giveUp(r, ok, lookups)
			return err
		case <-t.C():
			l.giveUp(r, ok, lookups)
			if st.misses++; st.misses >= maxLeaseTimeouts {
				return fmt.Errorf("client: leases: %d refreshes in a row unanswered", st.misses)
			}
			return nil
		}
	}
}

// buildLocked builds the next request, or nil when there is nothing to
// send. It also sweeps, every leaseSweepEvery.
func (l *leaser) buildLocked(st *stream, probe bool) (*weirv1.HoldRequest, lease.Refresh, bool, []*entry) {
	now := l.now()
	if now-l.swept >= leaseSweepEvery.Nanoseconds() {
		l.sweepLocked(now)
	}
	probe = probe && l.probe
	l.probe = false
	var r lease.Refresh
	var ok bool
	if probe {
		r, ok = l.h.Probe(leaseOwner, now)
	} else if due := l.h.Due(now); len(due) > 0 {
		r, ok = l.h.Refresh(leaseOwner, now)
	}
	n := min(len(l.pending), maxLookupsPerRequest)
	lookups := l.pending[:n:n]
	l.pending = l.pending[n:]
	if !ok && len(lookups) == 0 {
		return nil, r, false, nil
	}
	st.seq++
	req := &weirv1.HoldRequest{Seq: st.seq}
	for _, e := range lookups {
		req.Lookups = append(req.Lookups, &weirv1.LeaseLookup{Descriptors: e.desc})
	}
	for _, it := range r.Items {
		// A key whose descriptor sets were all forgotten cannot be named
		// to the node: its units strand (apply answers it Busy).
		if d := l.keyDesc[it.Key]; d != nil {
			req.Items = append(req.Items, &weirv1.LeaseItem{
				Descriptors: d, Key: it.Key, Demand: it.Demand,
				ReturnGrantor: it.Return.Grantor, ReturnLease: it.Return.Lease, ReturnUnspent: it.Return.Unspent,
			})
		}
	}
	return req, r, ok, lookups
}

// maxLookupsPerRequest stays within a node's default bound
// (clientlease.DefaultConfig's MaxLookups).
const maxLookupsPerRequest = 100

// giveUp abandons a refresh that got no answer and queues its lookups
// again.
func (l *leaser) giveUp(r lease.Refresh, ok bool, lookups []*entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ok && l.h != nil {
		l.h.Abandon(leaseOwner, r.Seq)
	}
	for _, e := range lookups {
		e.queued = false
		if e.state == looking {
			l.queueLocked(e)
		}
	}
	l.wakeLocked()
}

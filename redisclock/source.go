package redisclock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// PinKey is the key whose slot's master tells the time on a Redis Cluster.
// Every node of a weir cluster asks that one master, so all their clocks
// follow the same server clock, and every resync asks the same server
// again (until Redis Cluster moves the slot, when all follow it together).
const PinKey = "weir:clock"

// ClientSource tells the time of one Redis server through a go-redis
// client: the server itself for a single-node client, and the master that
// serves PinKey's slot for a *redis.ClusterClient. A ClusterClient would
// otherwise send each TIME to a random node, and the masters' clocks
// differ by as much as their hosts' do. Safe for concurrent use.
type ClientSource struct {
	client redis.UniversalClient
}

var _ Source = (*ClientSource)(nil)

// NewClientSource returns a Source reading client's TIME. The caller keeps
// owning client and closes it. Bound each call with its context: the
// client must have ContextTimeoutEnabled set for that to hold on a stalled
// server.
func NewClientSource(client redis.UniversalClient) (*ClientSource, error) {
	if client == nil {
		return nil, errors.New("redisclock: nil client")
	}
	return &ClientSource{client: client}, nil
}

// Time returns the pinned server's TIME in Unix nanoseconds (whole
// microseconds: Redis TIME has no finer resolution).
func (s *ClientSource) Time(ctx context.Context) (int64, error) {
	var server redis.Cmdable = s.client
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, PinKey)
		if err != nil {
			s.reloadOnFailure()
			return 0, fmt.Errorf("redisclock: time: the master of %q: %w", PinKey, err)
		}
		server = m
	}
	t, err := server.Time(ctx).Result()
	if err != nil {
		s.reloadOnFailure()
		return 0, fmt.Errorf("redisclock: time: %w", err)
	}
	return t.UnixNano(), nil
}

// reloadOnFailure asks a Cluster client to reload its slot map after a
// failed TIME: go-redis reloads it by itself only on MOVED, ASK and
// READONLY or once a minute, and a dead pinned master answers none of
// those, so the clock would keep asking it. The reload is asynchronous
// and coalesced by go-redis.
func (s *ClientSource) reloadOnFailure() {
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}

package main

import "errors"

// ready is /readyz: nil once the node can decide on the cluster's terms.
// Until then a load balancer should send it nothing, because
//   - with Redis, TATs are measured on the Redis clock: before its first
//     sync, now is this host's clock, and decisions (and the TATs they
//     persist) would be off by the hosts' clock difference;
//   - with gossip, before the first join succeeds the node sees only itself
//     and owns every group, deciding from memory keys that their real
//     owners also decide.
//
// A cluster of one (no --gossip-addr) and a node whose seeds are its own
// first members (no --join) have nothing to join. Safe for concurrent use.
func (st *state) ready() error {
	var errs []error
	if st.clock != nil && !st.clock.Synced() {
		errs = append(errs, errors.New("the redis time base is not synced yet"))
	}
	if st.wantGossip {
		if m := st.gossip.Load(); m == nil || !m.Joined() {
			errs = append(errs, errors.New("the gossip join has not succeeded yet"))
		}
	}
	return errors.Join(errs...)
}

package membership

import (
	"context"
	"net"
	"slices"
	"time"
)

// rejoinLoop joins, every interval, the seeds that are not alive members.
// memberlist forgets members it has declared dead, so after a partition
// heals neither side would contact the other again; a seed that is absent
// from the member table is the sign of that (or of a seed that started
// late). It runs until loopCtx ends.
func (m *Membership) rejoinLoop() {
	if len(m.seeds) == 0 {
		return
	}
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-m.loopCtx.Done():
			return
		case <-t.C:
		}
		if absent := m.absentSeeds(); len(absent) > 0 {
			m.join(absent)
		}
	}
}

// join joins seeds and counts the attempt. memberlist resolves each seed
// again on every call.
func (m *Membership) join(seeds []string) {
	n, err := m.list.Join(seeds)
	if err != nil {
		m.metrics.rejoins.WithLabelValues(resultFailure).Inc()
		m.logger.Warn("cannot join seeds; will retry", "seeds", seeds, "err", err, "retry_in", m.interval)
		return
	}
	m.joined.Store(true)
	m.metrics.rejoins.WithLabelValues(resultSuccess).Inc()
	m.logger.Info("joined seeds", "seeds", seeds, "reached", n)
}

// absentSeeds returns the seeds none of whose addresses is the gossip
// address of an alive member. A seed that does not resolve counts as
// absent, so the join reports the failure.
func (m *Membership) absentSeeds() []string {
	alive := make(map[string]bool)
	for _, mem := range m.Members() {
		alive[mem.GossipAddr] = true
	}
	var absent []string
	for _, seed := range m.seeds {
		addrs := m.resolve(seed)
		if !slices.ContainsFunc(addrs, func(a string) bool { return alive[a] }) {
			absent = append(absent, seed)
		}
	}
	return absent
}

// resolve returns seed's IP:port addresses, or nil if it does not resolve
// within the rejoin interval.
func (m *Membership) resolve(seed string) []string {
	host, port, err := net.SplitHostPort(seed)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(m.loopCtx, m.interval)
	defer cancel()
	ips, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return nil
	}
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = net.JoinHostPort(ip, port)
	}
	return out
}

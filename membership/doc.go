// Package membership tells a weir node which nodes are alive in its
// cluster, by gossip over hashicorp/memberlist.
//
// Each node gossips its name, its gossip address and a little metadata (its
// public gRPC address, its node-to-node peer address and its region). Nodes are told apart by name, so several nodes
// may share one IP on different ports. Failed nodes are detected by
// memberlist's probes; a node that leaves gracefully is dropped at once.
// Because memberlist stops contacting members it has declared dead, a
// rejoin loop periodically joins any seed that is not an alive member, so
// that both sides of a healed partition merge again and a node started
// before its seeds finds them later.
//
// memberlist reports a failure and a graceful leave with the same event, so
// Leave first gossips a "leaving" mark in the node's metadata; Failed lists
// the members that disappeared without it (declared dead: crashed, or on
// the far side of a split). Joined reports whether a join of the seeds has
// succeeded, for readiness.
//
// Usage:
//
//	cfg := membership.DefaultConfig()
//	cfg.BindAddr = "10.0.0.5:7946"
//	cfg.Join = []string{"weir-0.weir:7946", "weir-1.weir:7946"}
//	cfg.GRPCAddr, cfg.PeerAddr = "10.0.0.5:8081", "10.0.0.5:8091"
//	cfg.SecretKey = key // 16, 24 or 32 random bytes shared by the cluster
//	m, err := membership.Start(ctx, cfg, logger, prometheus.DefaultRegisterer)
//	if err != nil {
//		return err
//	}
//	defer m.Shutdown()
//	for {
//		select {
//		case <-m.Changes():
//			rebuildRing(m.Members(), m.Failed())
//		case <-ctx.Done():
//			_ = m.Leave(leaveCtx)
//			return nil
//		}
//	}
//
// Caller's duties: give every node a unique, stable name; use the same
// SecretKey on every node (rotate it with SetKeys, see docs/security.md);
// read Members again after each signal
// on Changes, which coalesces; call Leave before Shutdown on a planned stop,
// so the cluster moves ownership at once instead of after failure detection;
// always call Shutdown. Membership is safe for concurrent use.
//
// memberlist reads the real clock, so this package does too: its only timer
// is the rejoin ticker.
package membership

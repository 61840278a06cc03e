// Package regionlink wires package region into a weir node: it shares the
// budgets of scope: global limits between this node's region and the
// others over weir.region.v1, on the node-to-node listener. It does no
// I/O of its own: reports leave through a Sender and arrive at Handle,
// both of which package peer provides (peer.Client is a Sender, sending on
// the connection per peer that forwards and lease refreshes use;
// peer.Register serves a Link with peer.WithRegion; peertest's Network is
// the in-memory twin of both).
//
// A Link is three things on one node:
//
//   - the enforcer: the cluster calls Enforce on every decision it makes
//     as an owner; a global key is decided at this region's current share
//     of its limit (region.Share.Limit), its TAT rescaled, never reset,
//     when the share changes (region.Rescale), and its offered units
//     counted as demand;
//   - the reporter (Run): every interval one report per home region of the
//     demand on the global keys this node owns (region.Member), sent to any
//     node of that region (Config.Peers), or handled here for keys homed
//     in this region, and the grants that come back applied;
//   - the home (Handle, served by peer.Register): a node receiving a report
//     grants the keys it owns (region.Home) and forwards the others to
//     their owners inside its region, with the same report number and
//     reporter, merging their grants into one reply.
//
// Usage (cmd/node wires it when --region-peers is set):
//
//	peers, _ := peer.NewClient(peerCfg, logger, reg) // the node's one peer client
//	link, _ := regionlink.New(cfg, regionlink.Deps{Owners: routes, Sender: peers,
//		LimitName: limitName, Group: limitkey.Group}, logger, reg)
//	peer.Register(peerGRPCServer, handler, peer.WithRegion(link)) // the node-to-node server only
//	go link.Run(ctx)
//	// after every ring change:
//	link.RingChanged()
//
// Guaranteed names the part of a global limit the region holds whatever
// happens elsewhere (its floor, or its fixed strict part): the node caps
// failure-policy fallbacks of global keys at it (limiter.WithFallbackPart).
//
// Time: the reports' ticker and the Member's and the Home's readings
// come from Deps.Clock (clock.Real by default), the time elapsed since
// New; tests pass a clocktest.Manual and drive Run without sleeping.
//
// The caller's duties: pass the same Config.Shares in every region; call
// RingChanged after every ring change, so a key whose owner moved is not
// granted twice; cap the fallbacks of global keys at Guaranteed; serve the
// Link only through peer.Register on the node-to-node server, never on the
// public listener.
// docs/regions.md has the protocol and what each failure costs.
package regionlink

// Package peer is weir's node-to-node plane. It forwards decisions between
// the nodes of a weir cluster, and carries lease refreshes and region
// reports over the same connections. A node that receives a request for a
// group it does not own sends the already-resolved composite decision
// (keys, GCRA limits, cost, the time the node stamped on it, fast or
// strict: a decide.Request, whose wire form carries keys and numbers,
// never the limits' identities) to the group's owner, which answers with
// the per-limit gcra.Results, or says it is not the owner and names the one
// it believes in, or returns an error. The wire protocol is
// weir.peer.v1.Peer (api/weir/peer/v1).
//
// Concurrency limits, reservations and token ops (issue 26) travel in the
// same items: decide.Request.Reserve and Op (weir.peer.v1 Item fields 9
// and 10; an op item goes with cost 0, so an owner older than op refuses
// it instead of deciding it), and the owner's answer beyond the results,
// Result.Grant (ItemResult fields 6-14, absent when Grant is nil or zero,
// so a plain result is as small as before; a zero Grant reads as nil).
// Decide and DecideStream share the conversions. The server's codec
// refuses an op without a 16-byte id (INVALID_ARGUMENT); the Client
// answers a result carrying a token over ticket.MaxBytes or more
// in-flight counts than the item's keys as an owner error (Result.Err).
// Request.Grant and Defs never cross the wire.
//
// The owner side is a Handler, served with Register. The sending side is a
// Client; consumers should depend on the one-method Forwarder interface,
// which the Client and peertest's in-memory network both satisfy.
//
// The same service carries lease refreshes (package lease): a Handler that
// also implements LeaseHandler answers the Lease RPC, and the Client and
// peertest implement the one-method Leaser. Validating what arrives is the
// owner's job, not the transport's: intake.Validator checks forwarded items
// and lease items against the owner's clock and policy, replaces the
// sender's numbers, lease terms and limit name with the policy's, and
// fills each item's limit identities (decide.Request.Defs). peer imports
// neither the limiter nor the policy.
//
// Region reports (package region, weir.region.v1.Region in
// api/weir/region/v1) are the third kind: Register serves them with
// WithRegion and a RegionHandler (regionlink.Link), and the Client and
// peertest implement the one-method Reporter, which is regionlink.Sender.
//
// # One plane
//
// The package is the whole node-to-node plane, as memberlist's Transport
// carries every message kind: one Client per node holds one gRPC
// connection per peer address, with one set of credentials and dial
// options, for every kind of call; Forget and Close end all of them; one
// Register call serves every service on the peer server, so none can be
// left off the mutual-TLS listener or put on the public one by a second
// call site. peertest's Network is its in-memory twin, carrying all three
// kinds over the same faulty links. The wire conversions of every kind
// live here, beside the connection: peer imports the pure packages whose
// values travel (gcra, lease, region, decide), not the packages that wire them
// into a node. So regionlink, which consumes a Reporter and is served as a
// RegionHandler, imports neither gRPC nor the API (its interfaces match
// peer's by method set), and peer never imports regionlink: that would
// set the transport above a feature it carries, and regionlink's own tests,
// which run Links over peer.Client and peertest, would form a cycle.
//
// A region report that times out or finds its peer unavailable redials
// (Client.Send): calls made after it use a fresh connection, and those
// still running on the old one finish there before it closes. Forwards and
// lease refreshes do not redial by themselves (they use the fresh
// connection once a report made one); a peer that leaves the cluster is
// Forgotten, which closes its connection.
//
// Usage:
//
//	// Owner side, on the node's own peer gRPC server with the bounds of
//	// ServerConfig (message size, streams, keepalive, and a codec that
//	// answers malformed requests INVALID_ARGUMENT), behind the owner's
//	// Validator (package intake) that checks forwarded items against its clock and policy:
//	grpcServer := grpc.NewServer(append(creds, peer.DefaultServerConfig().ServerOptions()...)...)
//	v, err := intake.NewValidator(intake.DefaultValidatorConfig(), o, policies, nowNanos, registry)
//	peer.Register(grpcServer, v, peer.WithRegion(link)) // every service, once
//
//	// Sending side:
//	cfg := peer.DefaultClientConfig()
//	cfg.LocalName = "node-b"
//	c, err := peer.NewClient(cfg, logger, registry)
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	res, err := c.Decide(ctx, ownerAddr, item)
//	switch {
//	case err != nil: // no answer: apply the limit's failure policy
//	case res.NotOwner != "": // the ring moved: re-resolve and retry once
//	case res.Err != nil: // the owner could not decide
//	default: // res.Overall, res.Results
//	}
//
// # Batching
//
// Concurrent items for the same peer are coalesced into one batch of up to
// ClientConfig.MaxBatch items, and never more than MaxRequestBytes; each
// caller gets its own answer. The default
// is chosen for latency: with Window 0 nothing ever waits on a timer. An item
// leaves at once when no RPC to its peer is in flight; items arriving while
// one is in flight accumulate and leave together the moment it returns. So
// a lone request pays one round trip, and under load the batch size adapts
// to the round trip by itself. MaxInFlight (default 1) bounds the RPCs in
// flight per peer. Measured with 16 callers over loopback on 2 cores
// (BenchmarkClient_Decide): 1 in flight gave ~130k decisions/s at ~7.7
// items per RPC, 2 gave ~108k at ~4.1, 4 gave ~89k at ~2.5; a 50µs window
// gave ~23k, as timer wake-ups dominate. Fewer, fuller RPCs spend less CPU
// per decision, which is what runs out first. Raise MaxInFlight on machines
// with many cores or links with long round trips; set a Window only to cut
// RPC counts at the cost of latency. ("RPC" above means a batch in flight:
// see the next section for how batches travel.)
//
// # One stream per peer
//
// Batches travel on one long-lived bidirectional stream per peer,
// weir.peer.v1.Peer/DecideStream, on the same connection and credentials
// as every other call: one message per batch, carrying the batch's id and
// its time budget, answered by one message naming the id. So a batch costs
// no HTTP/2 HEADERS, stream setup or server goroutine start of its own, as
// a unary call does. One goroutine per stream receives the answers, in any
// order, and hands each to the sender waiting for it (the MaxInFlight
// slots work as before). A stream that fails (the peer died, a reset, a
// GOAWAY) fails the batches waiting on it at once, with the transport's
// error; the next batch opens a new stream. A Send still held back by flow
// control at its batch's deadline (the owner stopped reading, as a frozen
// process does) ends the stream too, so the sending slot is not kept; a
// batch whose Send returned waits for its answer within its own deadline
// only, failing no other batch on the stream. A batch larger than
// MaxStreamBatchBytes (only items near the largest valid one make one)
// goes as a unary Decide call, which the owner's in-flight budget gates;
// so does every batch for a minute after a peer answered the stream
// UNIMPLEMENTED (a node of the previous version, during a rolling upgrade:
// Decide is still served). The owner validates a stream batch exactly as a
// Decide request (same codec checks, same codes, ending the stream) and
// decides each in its own goroutine, at most MaxStreamBatches per stream
// and MaxStreamsPerConn streams per connection, so a batch waiting for
// Redis holds back no other and a peer cannot grow the owner's memory.
//
// # Deadlines
//
// Every forward ends by the earlier of the caller's deadline and
// ClientConfig.Timeout (a 1s ceiling by default: the caller's context is
// meant to carry the real budget, which the router (package forward) derives from its own
// caller's deadline), even if the peer hangs (frozen process, partition):
// the caller stops waiting at once and gets ctx.Err() or ErrTimeout. A
// batch is waited for until the latest deadline among its items, so no
// caller is cut short by another; the owner decides it under that deadline. An item whose caller gave up while it was
// still queued is never sent; one already sent may or may not have been
// decided by the owner, and its answer is dropped.
//
// The caller's duties:
//
//   - Stamp the request's Now (decide.Request) once, when the request arrives, and forward it as is.
//   - Treat an error as "no answer" and apply the limit's failure policy;
//     the Client never retries. Retry a NotOwner answer at most once, at the
//     owner it names or the one the ring says.
//   - Call Forget when a peer leaves the cluster, and Close once at
//     shutdown; Close fails pending calls with ErrClosed and returns after
//     the Client's goroutines have ended.
//   - On the owner side, return exactly one Result per item from
//     Handler.HandleDecide, and honour its context.
package peer

// Package grpclimittest drives bounded gRPC servers (see grpclimit) from
// tests: it serves one on a free loopback port for the length of a test,
// and dials it with a connection that puts any bytes on the wire, so a
// test can send what no honest client would (garbage, truncated or
// oversized messages, forged counts) and see how the server answers.
//
//	addr := grpclimittest.Serve(t, cfg.ServerOptions(), func(s *grpc.Server) { peer.Register(s, h) })
//	conn := grpclimittest.DialRaw(t, addr)
//	raw := []byte{0xff, 0xff, 0xff, 0xff, 0x0f}
//	err := conn.Invoke(ctx, "/weir.peer.v1.Peer/Decide", &raw, &peerv1.DecideResponse{})
//
// Both stop when the test ends (t.Cleanup); nothing outlives it.
package grpclimittest

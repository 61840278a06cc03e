// Package clientleasetest is an in-process weir node for tests of
// client-side leases: one owner of every group, deciding weir.v1 Decide
// over a memstore and granting leases from a real lease.Grantor on the
// same TATs (decisions use the ledger's Effective TAT, as a node's owner
// does), served with clientlease on a loopback gRPC server.
//
// Usage:
//
//	n := clientleasetest.New(pol)
//	srv := clientleasetest.Serve(t, n, clientlease.DefaultConfig(), nil)
//	cfg := client.DefaultConfig()
//	cfg.Target, cfg.Leases = srv.Addr, &client.LeaseConfig{}
//
// Node.Down makes the relay answer Busy (owners unreachable), SetPolicy
// reloads, and Decides, Refreshes, Outstanding and Stats tell a test what
// reached the owner.
package clientleasetest

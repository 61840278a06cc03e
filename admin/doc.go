// Package admin defines a weir node's read-only admin HTTP API, served on
// the node's own admin listener (--admin-addr, never the public HTTP port),
// and a small client for it that the weir CLI uses to ask every node of a
// cluster:
//
//	GET /admin/status              one node's Status
//	GET /admin/inspect?key=K...    a KeyState per key, read without consuming quota
//	GET /admin/shadow?since=1h     the node's shadow.Report
//
// The endpoints show limit keys, descriptor values and exact TATs of every
// tenant: the admin listener is loopback-only by default and, off loopback,
// HTTPS with client certificates from the cluster CA (docs/security.md).
package admin

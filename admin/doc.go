// Package admin defines a weir node's read-only admin HTTP API, served on
// its HTTP listener beside /metrics, and a small client for it that the
// weir CLI uses to ask every node of a cluster:
//
//	GET /admin/status              one node's Status
//	GET /admin/inspect?key=K...    a KeyState per key, read without consuming quota
//	GET /admin/shadow?since=1h     the node's shadow.Report
//
// The endpoints show limit keys and descriptor values: expose the HTTP port
// to operators and the metrics scraper only.
package admin

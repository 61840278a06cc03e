// Package servertest serves a weir.v1.RateLimiter implementation on a real
// loopback socket for the length of a test, for the tests of clients (the
// Go client, the CLI, the chaos workload) that need a server to talk to.
package servertest

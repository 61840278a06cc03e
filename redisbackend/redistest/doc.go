// Package redistest runs real redis-server processes for tests: a single
// server with [Start] (TLS with [StartTLS], ACL users with [WithACL]), a
// masters-only Redis Cluster with [StartCluster], a Cluster whose masters
// each have a replica with [StartClusterWithReplicas], which can kill a
// master ([Cluster.KillMaster]), fail one over ([Cluster.Failover]) and move
// a slot ([Cluster.MigrateSlot]), and a master with replicas watched by
// sentinels with [StartSentinel].
//
// Every server listens on a free loopback port chosen at start (never a fixed
// port), keeps no data on disk (no RDB, no AOF) and lives in the test's
// temporary directory. t.Cleanup kills every process and waits for it, and
// closes the clients handed out, so tests leave nothing behind.
//
// Usage:
//
//	func TestSomething(t *testing.T) {
//		srv := redistest.Start(t)
//		rdb := srv.Client() // go-redis client with ContextTimeoutEnabled
//		srv.Pause()         // SIGSTOP: Redis hangs, connections stay open
//		srv.Resume()
//		srv.Restart()       // empty Redis on the same port
//
//		g := redistest.StartSentinel(t, redistest.SentinelOptions{Password: "pw"})
//		old := g.Master().Addr()
//		g.Master().Stop()
//		promoted := g.WaitFailover(old, time.Minute) // every sentinel agrees
//	}
//
// Caller's duties: redis-server (and redis-cli for clusters) must be on PATH;
// the tests fail, never skip, when they are missing. Call methods that may
// fail the test from the test goroutine. A server left paused is still
// killed at cleanup.
package redistest

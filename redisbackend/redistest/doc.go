// Package redistest runs real redis-server processes for tests: a single
// server with [Start] (TLS with [StartTLS], ACL users with [WithACL]), a
// masters-only Redis Cluster with [StartCluster], a Cluster whose masters
// each have a replica with [StartClusterWithReplicas], which can kill a
// master ([Cluster.KillMaster]), fail one over ([Cluster.Failover]) and move
// a slot ([Cluster.MigrateSlot]), and a master with replicas watched by
// sentinels with [StartSentinel]; and [Memory], an in-memory twin of the
// Backend methods an owner uses, for unit tests that need no server.
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
// Memory: an in-memory twin of [redisbackend.Backend]'s LoadTATs, StoreTATs
// and DecidePipelined, as etcd raft's MemoryStorage is of its Storage. The
// consumer declares the interface it needs, and both satisfy it:
//
//	// in the owner's package
//	type Redis interface {
//		LoadTATs(ctx context.Context, keys []string) ([]int64, error)
//		StoreTATs(ctx context.Context, tats []redisbackend.TAT) error
//		DecidePipelined(ctx context.Context, reqs []redisbackend.DecideRequest) ([]redisbackend.Decision, []error, error)
//	}
//
//	// in its tests
//	mem := redistest.NewMemory(clk)           // a clocktest.Manual: Redis's clock
//	mem.FailNext(redistest.OpLoad, 1, redistest.Refused()) // "unreachable"
//	release := mem.Block(redistest.OpDecide)  // strict decisions hang
//	_ = mem.WaitBlocked(ctx, redistest.OpDecide, 1)
//	release()
//	n := mem.Calls(redistest.OpStore)
//
// Memory also twins LoadSets and StoreSets (permit sets of concurrency
// keys; OpLoadSets, OpStoreSets for faults and counts; Set and PutRaw read
// and write raw values), held to the Backend by the same conformance test
// on a single Redis and on Redis Cluster.
//
// For the same TATs, clock and input a Memory answers what a Backend on a
// single Redis answers (the conformance test in this package runs one table
// against both); [Memory] lists the few differences.
//
// Caller's duties: redis-server (and redis-cli for clusters) must be on
// PATH for the real servers; the tests fail, never skip, when they are
// missing. Call methods that may fail the test from the test goroutine. A
// server left paused is still killed at cleanup.
package redistest

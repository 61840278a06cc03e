// Package chaos runs weir's real binaries against faults and checks that it
// keeps its promises, the way Jepsen tests a database: a three-node cluster
// and a redis-server, each in its own network namespace (chaos/netlab), a
// client in a fourth namespace offering an open-loop workload
// (chaos/workload), a nemesis that partitions, kills, pauses and restarts
// on a schedule — or, for gray failures, starves nodes of CPU, throttles a
// node or Redis with a cgroup CPU quota, stalls nodes in turn and flaps a
// partition (gray.go) — a recorded history of every operation and fault
// (chaos/history), a checker that judges the history against the limits'
// bounds (chaos/checker), and a report with a plot per scenario
// (chaos/report).
//
// A scenario is one fault: healthy traffic, the fault, the heal, recovery.
// RedisFailoverSuite runs the nodes against a Redis Cluster of three
// masters with a replica each instead of one redis-server, and kills the
// master of the hot tenant's slot (rediscluster.go).
// HotKeySuite reproduces issue 10's hot-key runs (one key, 12 closed-loop
// workers, idle / CPU hogs / hogs and stalls) with their own policy.
// Each scenario gets a fresh cluster, so no scenario inherits another's
// state. Run needs root, iproute2 and nftables; it cleans up everything it
// made on success, failure, timeout and interrupt, and sweeps what a killed
// earlier run left behind.
//
// See docs/chaos.md for how to run it and what each scenario checks.
package chaos

// Command peers measures weir beside its two closest peers, gubernator and
// envoyproxy/ratelimit, on the same machine, with the same client and the
// same workloads, and writes the comparison table (`make bench-peers`).
//
// It lives in its own module so that the peers' dependencies (gubernator
// pulls in an old Kubernetes client, ratelimit its own go-control-plane)
// never enter weir's go.mod; it requires weir itself (replaced by the
// tree, ../..) for the routing client. Weir's k8s.io/api is newer than the
// one gubernator's client-go was released with, so client-go is raised to
// the matching release (gubernator's library only needs it for its
// Kubernetes discovery, which the bench does not use; its daemon is built
// from build/gubernator with its own versions). It builds every server itself, so it works
// from a clean clone with the module proxy: weir's node from the
// repository (-repo); gubernator v2.13.0 from build/gubernator, its daemon
// in a short main that names memberlist nodes (see there); ratelimit from
// build/ratelimit, whose go.mod names the pseudo-version as a `tool`. Each
// peer has its own go.mod there because, built in one module, ratelimit's
// newer OpenTelemetry makes gubernator exit at start.
//
// What one run does, for each system and each workload:
//
//   - start the system's processes on free loopback ports (and its own
//     redis-server where it needs one), wait until each answers, and stop
//     them all afterwards;
//   - drive it with one closed-loop client: -workers goroutines that each
//     send one decision, wait for the answer and send the next, spread
//     round-robin over every node's address. Weir and ratelimit are asked
//     through Envoy's RLS v3 (ShouldRateLimit); gubernator through its own
//     V1.GetRateLimits, one limit per call; the "routed" weir system
//     through weir's Go client with owner routing (weir.v1 Decide);
//   - then with an open-loop client: -paced-rate decisions per second on a
//     fixed schedule, whatever the answers, at most -paced-inflight
//     outstanding, counting those sent late;
//   - for weir with three nodes, drive one leasable hot key through each
//     node in turn (every worker on that node) and find its owner from
//     /admin/inspect, so that owner and non-owners compare;
//   - count decisions, latency (p50, p99) and, on a one-key workload, how
//     many the system admitted against the bound B + W/T that an exact
//     limiter must keep over the measured window W;
//   - meter the servers over exactly each measured window: utime + stime
//     of every process the system started, Redis included, from
//     /proc/<pid>/stat, and Redis's INFO commandstats, each read when the
//     warm-up ends and when the last measured decision is answered.
//
// The table ends with issue 24's targets computed from the rows, round by
// round.
//
// The limit is 100/s with a burst of 10 for every system that can express
// it: weir's GCRA, gubernator's leaky bucket. ratelimit has fixed windows
// only, so it gets 100 per second (its "burst" is the whole window) and is
// still judged against the bound of 100/s burst 10: that difference is what
// the hot-key column shows.
//
// Usage (from this directory):
//
//	go run . -repo ../.. -doc ../../docs/benchmarks.md
//
// It runs on Linux only (gubernator's nodes listen on 127.0.0.2 and
// 127.0.0.3, which Linux routes to loopback without setup). The caller
// needs redis-server on PATH, and two otherwise idle cores for figures
// worth quoting. Every server is a child process, stopped after its
// system's round and killed if the bench dies.
package main

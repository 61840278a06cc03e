// Command node runs one weir node: the weir.v1.RateLimiter gRPC API (with
// health and reflection), Envoy's RLS and RLQS on the same gRPC port
// (envoyrls, rlqs: rlqs.go connects its streams to the owners' leases), the
// HTTP API (/v1/decide, /metrics, /healthz, /readyz), and the limiter
// behind them.
//
// With no flags it starts on loopback with a built-in example policy and
// keeps state in memory:
//
//	go run ./cmd/node
//
// Flags (each also read from the environment as WEIR_<FLAG>, upper case,
// dashes as underscores; a flag on the command line wins; a malformed
// environment value fails startup like a malformed flag):
//
//	--grpc-addr      gRPC listen address (127.0.0.1:8081)
//	--http-addr      HTTP listen address (127.0.0.1:8080)
//	--policy         policy YAML file, hot-reloaded on change and on SIGHUP
//	--redis-addr     a single Redis (host:port): owners persist TATs there write-behind and
//	                 load them on first use; only strict limits run the Lua script there per decision
//	--redis-url      a single Redis as redis[s]://[user[:password]@]host[:port][/db][?client_name=&protocol=]
//	--redis-cluster  comma-separated Redis Cluster seeds (host:port or URLs)
//	--redis-sentinel MASTER@host:port,...: the master the sentinels name (one of these four)
//	--redis-username, --redis-password-file          ACL user and password (the file re-read on SIGHUP)
//	--redis-sentinel-password-file                   the sentinels' own password
//	--redis-tls-ca, --redis-tls-cert, --redis-tls-key, --redis-tls-server-name   TLS (and mTLS) to Redis
//	--redis-timeout  ceiling on one Redis call (50ms)
//	--sweep-interval how often idle in-memory keys are freed (10s)
//	--shutdown-timeout  how long in-flight calls may finish on SIGTERM (10s)
//	--max-keys, --max-inflight-bytes, --http-max-conns, --peer-max-skew   resource bounds (docs/security.md)
//	--log-format     text or json
//	--log-level      debug, info, warn or error
//	--check          validate flags, TLS files, gossip keys and the policy, print a summary and
//	                 exit (0 valid, 1 a file or the policy fails, 2 bad flags) without listening
//	--peer-addr      node-to-node listener (127.0.0.1:8091): forwarding only, never the public port
//	--peer-tls-cert, --peer-tls-key, --peer-tls-ca   mutual TLS on it (required off loopback)
//	--admin-addr     read-only /admin/* for weir status|shadow|inspect, and /debug/pprof/ (127.0.0.1:8092; "" off);
//	                 never the public port; HTTPS with peer-CA client certificates when --peer-tls-* are set
//	--gossip-addr, --join, --gossip-key-file          membership; gossip off loopback needs a key
//	--advertise-addr the IP:port other nodes gossip with; its IP replaces 0.0.0.0 / [::] in the
//	                 peer and gRPC addresses handed out (default: a specific --gossip-addr IP, else
//	                 the host's first private IP, else its name's; a gossiping node refuses to start without one)
//	--tls-cert, --tls-key, --tls-client-ca            TLS (and mTLS) on the public gRPC and HTTP listeners
//	--insecure-peer, --insecure-gossip                allow plaintext peer and admin / unencrypted gossip off loopback (isolated test networks only)
//
// docs/operations.md ("Connecting to Redis") explains the Redis forms and
// the ACL line weir needs. docs/security.md explains who can reach which port and how to set up and
// rotate certificates and gossip keys. SIGHUP reloads the policy, the
// gossip key file and the Redis password file; certificates are reloaded when their files change.
//
// SIGTERM and SIGINT stop the node gracefully: health turns NOT_SERVING,
// in-flight calls finish (up to --shutdown-timeout), then the node exits.
//
// The complete list, with the regions' flags, is `node -h` and the README
// (TestREADME_listsEveryNodeFlag keeps the README's list complete).
//
// This package only wires the others together; it holds no logic of its own.
package main

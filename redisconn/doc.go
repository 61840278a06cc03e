// Package redisconn turns Redis connection settings into a go-redis
// client: one server, a Redis Cluster, or a master found through Sentinel;
// an ACL user and a password read from a file (re-read on request, for
// rotation); TLS and mutual TLS from PEM files that are reloaded when they
// change.
//
// It parses the forms a node's flags accept ([ParseURL] for
// redis://[user[:password]@]host[:port][/db][?options] and rediss://,
// [ParseSeeds] for a Cluster's seeds, [ParseSentinel] for
// MASTER@host:port,host:port) and knows nothing of flags itself.
//
// Usage:
//
//	cfg := redisconn.DefaultConfig()
//	cfg.Mode, cfg.Addrs = redisconn.Single, []string{"redis.internal:6380"}
//	cfg.Username, cfg.PasswordFile = "weir", "/run/secrets/redis-password"
//	cfg.TLS = redisconn.TLS{Enabled: true, CAFile: "/etc/weir/redis-ca.crt"}
//	c, err := redisconn.New(cfg, logger)
//	if err != nil { ... }
//	defer c.Close()
//	go c.Run(ctx)          // reload the TLS files when they change
//	rdb := c.Redis()       // a redis.UniversalClient
//	err = c.ReloadPassword() // on SIGHUP: new connections use the new password
//	logger.Info("redis", "target", c) // String never shows a password
//
// The caller's duties: call Run for TLS material to follow file changes
// (without it the files are read once); call ReloadPassword when the
// password file has been replaced (connections already open stay
// authenticated with the password they were made with, so keep the old
// password valid on the server until the reload is done); never log
// Config's Password field itself, only String.
//
// Host names are dialled by the client's own dialer: a lookup that is
// late or fails for a temporary reason falls back to the name's last
// answer (see docs/operations.md, "Connecting to Redis"), so a stalled
// resolver does not keep a node from a Redis that is up.
//
// A password is never part of an error or of String: a URL that does not
// parse is reported with its password replaced by "xxxxx".
package redisconn

package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/weirhq/weir/redisconn"
)

// redisFlags are the flags that say how to reach Redis; parse turns them
// into conn, the redisconn settings openRedis connects with.
// docs/operations.md (Connecting to Redis) explains each form.
type redisFlags struct {
	RedisAddr                 string
	RedisURL                  string
	RedisCluster              string
	RedisSentinel             string
	RedisUsername             string
	RedisPasswordFile         string
	RedisSentinelPasswordFile string
	RedisTLSCA                string
	RedisTLSCert              string
	RedisTLSKey               string
	RedisTLSServerName        string

	conn redisconn.Config // set by parse; Mode 0 without Redis
}

// flags defines the Redis connection flags on fs. The two that may hold a
// password (--redis-url, --redis-cluster) take WEIR_* values as values,
// not as defaults, so that usage text never prints them.
func (r *redisFlags) flags(fs *flag.FlagSet, str func(*string, string, string, string), env *envFlags) {
	secret := func(p *string, name, usage string) {
		fs.StringVar(p, name, "", usage)
		env.apply(name)
	}
	str(&r.RedisAddr, "redis-addr", "", "single Redis host:port; empty (and no other --redis-* target) runs embedded, in memory")
	secret(&r.RedisURL, "redis-url", "single Redis as redis://[user[:password]@]host[:port][/db][?client_name=..&protocol=2|3], rediss:// for TLS; prefer --redis-password-file to a password here")
	secret(&r.RedisCluster, "redis-cluster", "comma-separated Redis Cluster seeds, host:port or URLs as --redis-url takes (database 0)")
	str(&r.RedisSentinel, "redis-sentinel", "", "Redis behind Sentinel: MASTER@host:port,host:port,... (the master's name, then the sentinels)")
	str(&r.RedisUsername, "redis-username", "", "Redis ACL user (needs --redis-password-file)")
	str(&r.RedisPasswordFile, "redis-password-file", "", "file holding the Redis password (AUTH); re-read on SIGHUP for rotation")
	str(&r.RedisSentinelPasswordFile, "redis-sentinel-password-file", "", "file holding the sentinels' own password (their requirepass), read at start")
	str(&r.RedisTLSCA, "redis-tls-ca", "", "PEM CA bundle Redis servers' certificates must chain to (turns TLS on; default roots: the system's)")
	str(&r.RedisTLSCert, "redis-tls-cert", "", "PEM client certificate for Redis servers that require one (mutual TLS; reloaded on change)")
	str(&r.RedisTLSKey, "redis-tls-key", "", "PEM private key of --redis-tls-cert")
	str(&r.RedisTLSServerName, "redis-tls-server-name", "", "name every Redis server's certificate must carry (default: the host dialled)")
}

// redisConfigured reports whether a Redis target was given.
func (r redisFlags) redisConfigured() bool { return r.conn.Mode != 0 }

// parse checks the flags against each other and builds conn. Errors name
// the flag and never show a password.
func (r *redisFlags) parse(timeout time.Duration) error {
	targets := r.targets()
	if len(targets) > 1 {
		return fmt.Errorf("%s are exclusive: give one way to reach Redis", strings.Join(targets, " and "))
	}
	if len(targets) == 0 {
		if set := r.settings(); len(set) > 0 {
			return fmt.Errorf("%s: no Redis to apply to: give --redis-addr, --redis-url, --redis-cluster or --redis-sentinel", strings.Join(set, ", "))
		}
		return nil
	}
	if timeout <= 0 {
		return fmt.Errorf("--redis-timeout %s must be positive", timeout)
	}
	c, explicitTLS, err := r.target(targets[0])
	if err != nil {
		return err
	}
	c.Timeout = timeout
	if err := r.credentials(&c, targets[0]); err != nil {
		return err
	}
	if err := r.tls(&c, targets[0], explicitTLS); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("redis connection settings: %w", err)
	}
	r.conn = c
	return nil
}

func (r redisFlags) targets() []string {
	var out []string
	for _, f := range []struct{ name, v string }{{"--redis-addr", r.RedisAddr}, {"--redis-url", r.RedisURL}, {"--redis-cluster", r.RedisCluster}, {"--redis-sentinel", r.RedisSentinel}} {
		if f.v != "" {
			out = append(out, f.name)
		}
	}
	return out
}

func (r redisFlags) settings() []string {
	var out []string
	for _, f := range []struct{ name, v string }{
		{"--redis-username", r.RedisUsername}, {"--redis-password-file", r.RedisPasswordFile}, {"--redis-sentinel-password-file", r.RedisSentinelPasswordFile},
		{"--redis-tls-ca", r.RedisTLSCA}, {"--redis-tls-cert", r.RedisTLSCert}, {"--redis-tls-key", r.RedisTLSKey}, {"--redis-tls-server-name", r.RedisTLSServerName},
	} {
		if f.v != "" {
			out = append(out, f.name)
		}
	}
	return out
}

// target parses the one target flag given. explicitTLS reports whether it
// chose the scheme itself (a URL), so the TLS flags cannot override it.
func (r redisFlags) target(name string) (c redisconn.Config, explicitTLS bool, err error) {
	var e redisconn.Endpoint
	switch name {
	case "--redis-addr":
		if e, err = redisconn.ParseURL(r.RedisAddr); err == nil && strings.Contains(r.RedisAddr, "://") {
			err = errors.New("takes host:port; give a URL to --redis-url")
		}
		c.Mode = redisconn.Single
	case "--redis-url":
		e, err = redisconn.ParseURL(r.RedisURL)
		c.Mode, explicitTLS = redisconn.Single, true
	case "--redis-cluster":
		e, err = redisconn.ParseSeeds(splitList(r.RedisCluster))
		c.Mode, explicitTLS = redisconn.Cluster, strings.Contains(r.RedisCluster, "://")
	case "--redis-sentinel":
		c.Mode = redisconn.Sentinel
		c.MasterName, e.Addrs, err = redisconn.ParseSentinel(r.RedisSentinel)
	}
	if err != nil {
		return redisconn.Config{}, false, fmt.Errorf("%s: %w", name, err)
	}
	c.Addrs, c.DB, c.Username, c.Password = e.Addrs, e.DB, e.Username, e.Password
	c.TLS.Enabled, c.ClientName, c.Protocol = e.TLS, e.ClientName, e.Protocol
	return c, explicitTLS, nil
}

func (r redisFlags) credentials(c *redisconn.Config, target string) error {
	if r.RedisUsername != "" {
		if c.Username != "" {
			return fmt.Errorf("--redis-username and the user in %s are exclusive", target)
		}
		c.Username = r.RedisUsername
	}
	if r.RedisPasswordFile != "" {
		if c.Password != "" {
			return fmt.Errorf("--redis-password-file and the password in %s are exclusive", target)
		}
		c.PasswordFile = r.RedisPasswordFile
	}
	if c.Username != "" && c.Password == "" && c.PasswordFile == "" {
		return errors.New("--redis-username needs --redis-password-file")
	}
	if r.RedisSentinelPasswordFile != "" {
		if c.Mode != redisconn.Sentinel {
			return errors.New("--redis-sentinel-password-file needs --redis-sentinel")
		}
		c.SentinelPasswordFile = r.RedisSentinelPasswordFile
	}
	return nil
}

func (r redisFlags) tls(c *redisconn.Config, target string, explicitTLS bool) error {
	t := redisconn.TLS{Enabled: c.TLS.Enabled, CAFile: r.RedisTLSCA, CertFile: r.RedisTLSCert, KeyFile: r.RedisTLSKey, ServerName: r.RedisTLSServerName}
	set := r.settings()
	var tlsSet []string
	for _, s := range set {
		if strings.HasPrefix(s, "--redis-tls-") {
			tlsSet = append(tlsSet, s)
		}
	}
	if len(tlsSet) > 0 && !t.Enabled {
		if explicitTLS {
			return fmt.Errorf("%s given but %s says redis:// (plaintext): use rediss://", strings.Join(tlsSet, ", "), target)
		}
		t.Enabled = true
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return errors.New("--redis-tls-cert and --redis-tls-key go together")
	}
	c.TLS = t
	return nil
}

// reloadRedisPassword re-reads --redis-password-file (on SIGHUP): new Redis
// connections authenticate with the new password, open ones stay as they
// are. A file that does not read changes nothing.
func (n *node) reloadRedisPassword(cfg config) {
	if n.redisConn == nil || cfg.RedisPasswordFile == "" {
		return
	}
	if err := n.redisConn.ReloadPassword(); err != nil {
		n.logger.Warn("redis password reload on SIGHUP rejected; the previous password stays in use", "err", err)
		return
	}
	n.logger.Info("redis password reloaded", "file", cfg.RedisPasswordFile)
}

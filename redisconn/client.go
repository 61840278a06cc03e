package redisconn

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/tlsfiles"
)

// Client is an open go-redis client and the material it keeps current: the
// password from PasswordFile and the TLS files. Its methods are safe for
// concurrent use.
type Client struct {
	cfg    Config
	rdb    redis.UniversalClient
	tls    *tlsfiles.Store // nil without TLS files
	dialer *dialer
	logger *slog.Logger
	creds  atomic.Pointer[credentials]
}

type credentials struct{ username, password string }

// New validates cfg, reads the password files and TLS files, and builds
// the client. It does not wait for Redis: a server that is down now is
// dialled again by every command. A file that cannot be read fails New
// (naming the file, never its content).
func New(cfg Config, logger *slog.Logger) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg.Addrs = slices.Clone(cfg.Addrs) // the caller's stays theirs
	c := &Client{cfg: cfg, logger: logger}
	if err := c.loadPassword(); err != nil {
		return nil, err
	}
	opts, err := c.options()
	if err != nil {
		return nil, err
	}
	c.rdb = redis.NewUniversalClient(opts)
	return c, nil
}

// options builds the go-redis settings from c.cfg.
func (c *Client) options() (*redis.UniversalOptions, error) {
	cfg := c.cfg
	o := &redis.UniversalOptions{
		Addrs:                 slices.Clone(cfg.Addrs), // go-redis reorders sentinels in place
		IsClusterMode:         cfg.Mode == Cluster,
		MasterName:            cfg.MasterName,
		DB:                    cfg.DB,
		ClientName:            cfg.ClientName,
		Protocol:              cfg.Protocol,
		DialTimeout:           cfg.dialTimeout(),
		ReadTimeout:           cfg.Timeout,
		WriteTimeout:          cfg.Timeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1, // a retry would overrun the caller's deadline
	}
	if cfg.Password != "" || cfg.PasswordFile != "" {
		o.CredentialsProviderContext = c.credentials
	}
	if cfg.SentinelPasswordFile != "" {
		p, err := readSecret(cfg.SentinelPasswordFile)
		if err != nil {
			return nil, err
		}
		o.SentinelUsername, o.SentinelPassword = cfg.SentinelUsername, p
	}
	if cfg.TLS.Enabled {
		if cfg.TLS.CAFile != "" || cfg.TLS.CertFile != "" {
			s, err := tlsfiles.Load(tlsfiles.Config{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile, CAFile: cfg.TLS.CAFile}, c.logger.With("tls", "redis"))
			if err != nil {
				return nil, fmt.Errorf("redisconn: tls: %w", err)
			}
			c.tls = s
		}
		o.TLSConfig = c.tlsConfig()
	}
	// The dialer does TLS itself (go-redis's own is bypassed with a Dialer);
	// TLSConfig stays set for what go-redis reads of it.
	c.dialer = newDialer(o.TLSConfig, c.logger)
	o.Dialer = c.dialer.DialContext
	return o, nil
}

// credentials is go-redis's CredentialsProviderContext: called for every
// new connection, it hands out the password loaded last.
func (c *Client) credentials(context.Context) (string, string, error) {
	cr := c.creds.Load()
	return cr.username, cr.password, nil
}

// loadPassword reads the password (from the file, or the fixed one) and
// installs it for new connections.
func (c *Client) loadPassword() error {
	p := c.cfg.Password
	if c.cfg.PasswordFile != "" {
		var err error
		if p, err = readSecret(c.cfg.PasswordFile); err != nil {
			return err
		}
	}
	c.creds.Store(&credentials{username: c.cfg.Username, password: p})
	return nil
}

// ReloadPassword re-reads PasswordFile; connections made from now on
// authenticate with its password, the ones open stay as they are. A file
// that does not read (missing, empty) changes nothing and is reported.
// Without a PasswordFile it does nothing.
func (c *Client) ReloadPassword() error {
	if c.cfg.PasswordFile == "" {
		return nil
	}
	return c.loadPassword()
}

// readSecret reads a password file, trimming the white space around it.
// Errors name the file, never what it holds.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("redisconn: password file %s: %w", path, err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "", fmt.Errorf("redisconn: password file %s is empty", path)
	}
	return string(b), nil
}

// tlsConfig is the TLS configuration of every connection. It reads the
// Store on every handshake: the client certificate through
// GetClientCertificate, the CA bundle in VerifyConnection (crypto/tls
// would fix RootCAs when the config is built), so that connections made
// after a rotation use the new files.
func (c *Client) tlsConfig() *tls.Config {
	name := c.cfg.TLS.ServerName
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: name}
	if c.tls == nil {
		return conf // the system roots, fixed: there are no files to follow
	}
	conf.GetClientCertificate = c.tls.ClientConfig(name).GetClientCertificate
	// Verification is done in VerifyConnection, against the bundle of the
	// moment; crypto/tls's own would use a bundle fixed here.
	conf.InsecureSkipVerify = true
	conf.VerifyConnection = func(cs tls.ConnectionState) error {
		return verifyServer(cs, c.tls.ClientConfig(name).RootCAs)
	}
	return conf
}

// verifyServer checks the server's chain against roots (the system roots
// when nil) and its name against the name dialled or configured, as
// crypto/tls does.
func verifyServer(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("redisconn: the server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: cs.ServerName, Roots: roots, Intermediates: inter})
	if err != nil {
		return fmt.Errorf("redisconn: server certificate: %w", err)
	}
	return nil
}

// Redis is the go-redis client: a *redis.Client for Single and Sentinel
// (which follows the master the sentinels name), a *redis.ClusterClient
// for Cluster.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Run reloads the TLS files when they change, until ctx ends. Without TLS
// files it just waits for ctx.
func (c *Client) Run(ctx context.Context) error {
	if c.tls == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	return c.tls.Run(ctx)
}

// Close closes the client's connections and ends its name lookups.
func (c *Client) Close() error {
	c.dialer.close()
	return c.rdb.Close()
}

// String describes the target as Config.String does, without a password.
func (c *Client) String() string { return c.cfg.String() }

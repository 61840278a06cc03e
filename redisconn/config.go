package redisconn

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Mode is the shape of the Redis deployment.
type Mode int

const (
	// Single is one Redis server (or a proxy in front of several).
	Single Mode = iota + 1
	// Cluster is a Redis Cluster; Addrs are seeds, the rest is discovered.
	Cluster
	// Sentinel is a master and its replicas watched by Sentinel; Addrs are
	// the sentinels, asked for the master named MasterName.
	Sentinel
)

func (m Mode) String() string {
	switch m {
	case Single:
		return "single"
	case Cluster:
		return "cluster"
	case Sentinel:
		return "sentinel"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// Config is everything needed to connect. The zero value is not valid: set
// Mode and Addrs. Validate checks it; New never modifies it.
type Config struct {
	// Mode says what Addrs are.
	Mode Mode
	// Addrs are host:port addresses: the server (Single, exactly one), the
	// seeds (Cluster, one or more) or the sentinels (Sentinel, one or more).
	Addrs []string
	// MasterName is the name the sentinels know the master by (Sentinel
	// only, required there).
	MasterName string
	// DB is the database number SELECTed on every connection, 0 to 15 on a
	// stock server (Single only: Cluster and Sentinel use database 0 here).
	DB int
	// Username is the ACL user; empty authenticates as "default" when a
	// password is set, and sends no AUTH without one.
	Username string
	// Password is a fixed password, as given in a URL. Exclusive with
	// PasswordFile. Never logged: String shows only that one is set.
	Password string
	// PasswordFile is a file holding the password (surrounding white space
	// is ignored). It is read by New and by every ReloadPassword.
	PasswordFile string
	// SentinelPasswordFile holds the sentinels' own password (their
	// requirepass), read once by New (Sentinel only; empty: the sentinels
	// need none). SentinelUsername is their ACL user, if any.
	SentinelPasswordFile string
	SentinelUsername     string
	// ClientName is set with CLIENT SETNAME on every connection (it shows
	// in CLIENT LIST); empty sets none.
	ClientName string
	// Protocol is the RESP version, 2 or 3; 0 means go-redis's default (3,
	// falling back to 2 on servers without HELLO).
	Protocol int
	// TLS secures every connection, to the sentinels too.
	TLS TLS
	// Timeout bounds one command's reads and writes; dials get at least
	// MinDialTimeout (MinTLSDialTimeout with TLS). go-redis retries are
	// off: a retry would overrun the caller's deadline.
	Timeout time.Duration
}

// MinDialTimeout is the floor on the dial timeout of a plaintext
// connection, MinTLSDialTimeout of a TLS one (a TCP handshake, then TLS's
// round trips and key exchange). go-redis dials in the background: a
// command waiting for a new connection gives up at its own deadline and
// the dial goes on, its connection joining the pool. So a floor above
// Timeout costs no command any latency, and lets a connection be made on a
// network or host too slow to make one within a command's budget.
const (
	MinDialTimeout    = 100 * time.Millisecond
	MinTLSDialTimeout = time.Second
)

func (c Config) dialTimeout() time.Duration {
	if c.TLS.Enabled {
		return max(c.Timeout, MinTLSDialTimeout)
	}
	return max(c.Timeout, MinDialTimeout)
}

// TLS is the TLS material of the connections. With Enabled and no files,
// servers are verified against the system roots.
type TLS struct {
	// Enabled turns TLS on (rediss:// URLs, or any file below set).
	Enabled bool
	// CAFile is a PEM bundle the servers' certificates must chain to;
	// empty uses the system roots.
	CAFile string
	// CertFile and KeyFile are the client certificate and key presented to
	// servers that require one (mutual TLS); both or neither.
	CertFile, KeyFile string
	// ServerName is the name every server's certificate must carry; empty
	// checks the host dialled (an IP for Cluster and Sentinel-announced
	// addresses, so those certificates then need IP SANs).
	ServerName string
}

// DefaultConfig returns a Config with weir's default timeout and nothing to
// connect to yet.
func DefaultConfig() Config {
	return Config{Timeout: 50 * time.Millisecond}
}

// Validate reports every problem with c, naming the field. It changes
// nothing and reads no file.
func (c Config) Validate() error {
	var errs []error
	switch c.Mode {
	case Single:
		if len(c.Addrs) != 1 {
			errs = append(errs, fmt.Errorf("redisconn: Addrs: a single server takes one address, got %d", len(c.Addrs)))
		}
	case Cluster, Sentinel:
		if len(c.Addrs) == 0 {
			errs = append(errs, fmt.Errorf("redisconn: Addrs: %s needs at least one address", c.Mode))
		}
	default:
		errs = append(errs, fmt.Errorf("redisconn: Mode %d: want Single, Cluster or Sentinel", int(c.Mode)))
	}
	for _, a := range c.Addrs {
		if err := checkHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("redisconn: Addrs: %w", err))
		}
	}
	if (c.Mode == Sentinel) != (c.MasterName != "") {
		errs = append(errs, errors.New("redisconn: MasterName: set it with Sentinel, and only then"))
	}
	if c.Mode != Sentinel && (c.SentinelPasswordFile != "" || c.SentinelUsername != "") {
		errs = append(errs, errors.New("redisconn: SentinelPasswordFile, SentinelUsername: only with Sentinel"))
	}
	if c.SentinelUsername != "" && c.SentinelPasswordFile == "" {
		errs = append(errs, errors.New("redisconn: SentinelUsername needs SentinelPasswordFile"))
	}
	if c.DB < 0 || (c.DB != 0 && c.Mode != Single) {
		errs = append(errs, fmt.Errorf("redisconn: DB %d: want 0 or more, and 0 on Cluster and Sentinel", c.DB))
	}
	if c.Password != "" && c.PasswordFile != "" {
		errs = append(errs, errors.New("redisconn: Password and PasswordFile are exclusive"))
	}
	if c.Username != "" && c.Password == "" && c.PasswordFile == "" {
		errs = append(errs, errors.New("redisconn: Username needs a password (Password or PasswordFile)"))
	}
	if c.Protocol != 0 && c.Protocol != 2 && c.Protocol != 3 {
		errs = append(errs, fmt.Errorf("redisconn: Protocol %d: want 2 or 3", c.Protocol))
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("redisconn: TLS.CertFile and TLS.KeyFile go together"))
	}
	if !c.TLS.Enabled && c.TLS != (TLS{}) {
		errs = append(errs, errors.New("redisconn: TLS: files given but TLS.Enabled is false"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("redisconn: Timeout %s must be positive", c.Timeout))
	}
	return errors.Join(errs...)
}

func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", a, err)
	}
	if host == "" || port == "" {
		return fmt.Errorf("%q is not host:port", a)
	}
	return nil
}

// String describes c for logs and status output, as a URL with the
// password replaced: "rediss://weir:xxxxx@redis:6380/2 (password from
// /run/secrets/p)". It never shows a password.
func (c Config) String() string {
	var b strings.Builder
	switch c.Mode {
	case Sentinel:
		b.WriteString("sentinel ")
		b.WriteString(c.MasterName)
		b.WriteByte('@')
	case Cluster:
		b.WriteString("cluster ")
	}
	scheme := "redis://"
	if c.TLS.Enabled {
		scheme = "rediss://"
	}
	b.WriteString(scheme)
	if c.Username != "" {
		b.WriteString(c.Username)
	}
	if c.Password != "" || c.PasswordFile != "" {
		b.WriteString(":" + redacted)
	}
	if c.Username != "" || c.Password != "" || c.PasswordFile != "" {
		b.WriteByte('@')
	}
	b.WriteString(strings.Join(c.Addrs, ","))
	if c.DB != 0 {
		fmt.Fprintf(&b, "/%d", c.DB)
	}
	if c.PasswordFile != "" {
		fmt.Fprintf(&b, " (password from %s)", c.PasswordFile)
	}
	if c.TLS.CertFile != "" {
		b.WriteString(" (client certificate)")
	}
	return b.String()
}

// redacted stands in for a password wherever one would be shown.
const redacted = "xxxxx"

package membership

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Profiles select memberlist's timing defaults.
const (
	// ProfileLAN is memberlist.DefaultLANConfig: failure detection in a few
	// seconds on a data-centre network. The default.
	ProfileLAN = "lan"
	// ProfileLocal is memberlist.DefaultLocalConfig: faster probes and
	// shorter timeouts, for tests and single-host clusters.
	ProfileLocal = "local"
)

// Config configures one member. Every field is read once, by Start.
type Config struct {
	// NodeName names this node in the cluster and on the ring. It must be
	// unique in the cluster and stable across restarts. Default: hostname.
	NodeName string
	// BindAddr is the IP:port memberlist listens on, TCP and UDP on the
	// same port. Port 0 picks a free port (see Membership.GossipAddr).
	// Default "0.0.0.0:7946".
	BindAddr string
	// AdvertiseAddr is the IP:port other members should use to reach this
	// one. Empty: the bind address, or a private IP of this host when
	// binding to all interfaces. A port of 0 (or a bind port of 0) means
	// the actually bound port.
	AdvertiseAddr string
	// Join lists seed members as host:port, where host may be a DNS name.
	// Seeds are resolved afresh on every attempt. An unreachable seed is
	// not an error: the rejoin loop keeps trying.
	Join []string
	// RejoinInterval is how often seeds that are not alive members are
	// joined again. memberlist stops talking to members it declared dead,
	// so without this the two sides of a healed partition stay apart.
	// Shorter heals faster at the cost of a TCP push/pull per absent seed
	// per interval. Default 10s.
	RejoinInterval time.Duration
	// SecretKey, when set, encrypts and authenticates gossip with AES
	// (16, 24 or 32 bytes for AES-128/192/256): the primary key, used to
	// encrypt. Members that share no key cannot form a cluster, and a
	// member without a key cannot join a keyed one.
	SecretKey []byte
	// SecondaryKeys are further keys accepted when decrypting, same sizes,
	// for rotation (see docs/security.md). They need a SecretKey.
	SecondaryKeys [][]byte
	// GRPCAddr is this node's public gRPC address, carried in gossip
	// metadata.
	GRPCAddr string
	// PeerAddr is the host:port of this node's node-to-node listener,
	// carried in gossip metadata: the address other members forward to.
	PeerAddr string
	// Region is this node's region, carried in gossip metadata.
	Region string
	// Profile is ProfileLAN (default) or ProfileLocal.
	Profile string
	// FailedMemory is how long a member declared dead (not one that left
	// gracefully) is still reported by Membership.Failed, unless it comes
	// back first. Longer recognises the healing of longer splits; shorter
	// forgets sooner the names of nodes that were replaced for good.
	// Default 10m; must be positive.
	FailedMemory time.Duration
}

// DefaultConfig returns a LAN configuration named after the host, binding
// all interfaces on memberlist's usual port.
func DefaultConfig() Config {
	host, _ := os.Hostname() // empty on error; Validate then reports it
	return Config{
		NodeName:       host,
		BindAddr:       "0.0.0.0:7946",
		RejoinInterval: 10 * time.Second,
		Profile:        ProfileLAN,
		FailedMemory:   10 * time.Minute,
	}
}

// Validate reports the first invalid field. It changes nothing.
func (c Config) Validate() error {
	if c.NodeName == "" {
		return errors.New("membership: node name is empty")
	}
	if _, _, err := splitIPPort(c.BindAddr); err != nil {
		return fmt.Errorf("membership: bind address: %w", err)
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := splitIPPort(c.AdvertiseAddr); err != nil {
			return fmt.Errorf("membership: advertise address: %w", err)
		}
	}
	for _, s := range c.Join {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("membership: seed %q: %w", s, err)
		}
	}
	if c.RejoinInterval <= 0 {
		return fmt.Errorf("membership: rejoin interval %v must be positive", c.RejoinInterval)
	}
	if c.FailedMemory <= 0 {
		return fmt.Errorf("membership: failed memory %v must be positive", c.FailedMemory)
	}
	if len(c.SecretKey) > 0 {
		if err := checkKey(c.SecretKey); err != nil {
			return fmt.Errorf("membership: secret key: %w", err)
		}
	}
	if len(c.SecondaryKeys) > 0 && len(c.SecretKey) == 0 {
		return errors.New("membership: secondary keys without a secret key")
	}
	for i, k := range c.SecondaryKeys {
		if err := checkKey(k); err != nil {
			return fmt.Errorf("membership: secondary key %d: %w", i+1, err)
		}
	}
	if c.Profile != ProfileLAN && c.Profile != ProfileLocal {
		return fmt.Errorf("membership: profile %q, want %q or %q", c.Profile, ProfileLAN, ProfileLocal)
	}
	if n := len(c.meta().encode()); n > memberlist.MetaMaxSize {
		return fmt.Errorf("membership: metadata is %d bytes, memberlist allows %d", n, memberlist.MetaMaxSize)
	}
	return nil
}

// checkKey reports a gossip key of a size AES does not take.
func checkKey(k []byte) error {
	switch len(k) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("%d bytes, want 16, 24 or 32", len(k))
}

func (c Config) meta() meta {
	return meta{GRPCAddr: c.GRPCAddr, PeerAddr: c.PeerAddr, Region: c.Region}
}

// splitIPPort parses "IP:port". memberlist binds and advertises IP
// literals only: a host name here would silently bind every interface.
func splitIPPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("%q is not an IP address", host)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return host, port, nil
}

// memberlistConfig translates c into memberlist's configuration. c must be
// valid.
func (c Config) memberlistConfig() *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	if c.Profile == ProfileLocal {
		mc = memberlist.DefaultLocalConfig()
	}
	mc.Name = c.NodeName
	mc.BindAddr, mc.BindPort, _ = splitIPPort(c.BindAddr)
	mc.AdvertisePort = mc.BindPort
	if c.AdvertiseAddr != "" {
		var port int
		mc.AdvertiseAddr, port, _ = splitIPPort(c.AdvertiseAddr)
		if port != 0 {
			mc.AdvertisePort = port
		}
	}
	if len(c.SecretKey) > 0 {
		mc.SecretKey = append([]byte(nil), c.SecretKey...)
		// memberlist adds SecretKey to the keyring as its primary key.
		mc.Keyring, _ = memberlist.NewKeyring(cloneKeys(c.SecondaryKeys), nil) // sizes checked by Validate
	}
	return mc
}

func cloneKeys(keys [][]byte) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = append([]byte(nil), k...)
	}
	return out
}

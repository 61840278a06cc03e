package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
)

// security is the part of the configuration that decides who can reach
// what: the node-to-node (peer) listener and its mutual TLS, gossip
// encryption, and TLS on the public listeners. docs/security.md explains
// each flag.
type security struct {
	PeerAddr          string
	AdminAddr         string
	PeerTLSCert       string
	PeerTLSKey        string
	PeerTLSCA         string
	PeerTLSServerName string
	AdminTLSCA        string
	InsecurePeer      bool
	GossipKey         string
	GossipKeyFile     string
	InsecureGossip    bool
	TLSCert, TLSKey   string
	TLSClientCA       string
}

// flags defines the security flags on fs; str and boolean take their
// defaults from WEIR_* variables as every other flag does.
func (s *security) flags(fs *flag.FlagSet, str func(*string, string, string, string), boolean func(*bool, string, bool, string)) {
	str(&s.PeerAddr, "peer-addr", "127.0.0.1:8091", "node-to-node gRPC listen address (forwarding between owners; never the public port). Off loopback it needs --peer-tls-* or --insecure-peer")
	str(&s.AdminAddr, "admin-addr", "127.0.0.1:8092", "read-only admin HTTP listen address (/admin/status, /admin/shadow, /admin/inspect; never the public port); empty disables. Off loopback it needs --peer-tls-* (HTTPS, client certificates from --admin-tls-ca, or the peer CA without it) or --insecure-peer")
	str(&s.PeerTLSCert, "peer-tls-cert", "", "PEM certificate this node presents on the peer plane, as server and as client (reloaded on change)")
	str(&s.PeerTLSKey, "peer-tls-key", "", "PEM private key of --peer-tls-cert")
	str(&s.PeerTLSCA, "peer-tls-ca", "", "PEM CA bundle peers' certificates must chain to, both ways (mutual TLS)")
	str(&s.AdminTLSCA, "admin-tls-ca", "", "PEM CA bundle of operator certificates: the admin listener then accepts client certificates from it only (not from --peer-tls-ca); must not be, or be issued by, the peer CA, so operator certificates never work on the peer plane")
	str(&s.PeerTLSServerName, "peer-tls-server-name", "", "name every peer's certificate must carry (default: the peer's advertised host)")
	boolean(&s.InsecurePeer, "insecure-peer", false, "allow a plaintext, unauthenticated peer listener off loopback (isolated test networks only)")
	str(&s.GossipKey, "gossip-key", "", "base64 gossip encryption key (16, 24 or 32 bytes); prefer --gossip-key-file")
	str(&s.GossipKeyFile, "gossip-key-file", "", "file of base64 gossip keys, one a line, the first used to encrypt, the others accepted (rotation; re-read on SIGHUP)")
	boolean(&s.InsecureGossip, "insecure-gossip", false, "allow unencrypted gossip off loopback (isolated test networks only)")
	str(&s.TLSCert, "tls-cert", "", "PEM certificate for the public gRPC and HTTP listeners (reloaded on change)")
	str(&s.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	str(&s.TLSClientCA, "tls-client-ca", "", "PEM CA bundle: public clients must present a certificate from it (mutual TLS)")
}

func (s security) peerTLS() bool   { return s.PeerTLSCert != "" }
func (s security) publicTLS() bool { return s.TLSCert != "" }

// adminExposed reports whether the admin listener is on and reachable
// beyond this host without the peer mTLS material to protect it.
func (s security) adminExposed() bool {
	return s.AdminAddr != "" && !isLoopback(s.AdminAddr) && !s.peerTLS()
}

func (s security) gossipKeyed() bool {
	return s.GossipKey != "" || s.GossipKeyFile != ""
}

// validate checks the flags against each other and refuses exposed
// listeners without protection. gossipAddr and advertise are the gossip
// bind and advertise addresses.
func (s security) validate(gossipAddr, advertise string) []error {
	var errs []error
	if n := countSet(s.PeerTLSCert, s.PeerTLSKey, s.PeerTLSCA); n != 0 && n != 3 {
		errs = append(errs, errors.New("--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together (mutual TLS needs all three)"))
	}
	if !isLoopback(s.PeerAddr) && !s.peerTLS() && !s.InsecurePeer {
		errs = append(errs, fmt.Errorf("--peer-addr %s is reachable beyond this host: give --peer-tls-cert, --peer-tls-key and --peer-tls-ca, or --insecure-peer on an isolated network", s.PeerAddr))
	}
	if s.AdminTLSCA != "" && !s.peerTLS() {
		errs = append(errs, errors.New("--admin-tls-ca needs --peer-tls-cert, --peer-tls-key and --peer-tls-ca (the admin listener serves the node's peer certificate)"))
	}
	if s.adminExposed() && !s.InsecurePeer {
		errs = append(errs, fmt.Errorf("--admin-addr %s is reachable beyond this host: give --peer-tls-cert, --peer-tls-key and --peer-tls-ca (HTTPS with client certificates), or --insecure-peer on an isolated network", s.AdminAddr))
	}
	if gossipAddr != "" && (!isLoopback(gossipAddr) || (advertise != "" && !isLoopback(advertise))) && isLoopback(s.PeerAddr) {
		errs = append(errs, fmt.Errorf("gossip is on %s but --peer-addr %s is loopback: other nodes could not forward to this one", gossipAddr, s.PeerAddr))
	}
	if s.GossipKey != "" && s.GossipKeyFile != "" {
		errs = append(errs, errors.New("--gossip-key and --gossip-key-file are exclusive"))
	}
	if gossipAddr != "" && !isLoopback(gossipAddr) && !s.gossipKeyed() && !s.InsecureGossip {
		errs = append(errs, fmt.Errorf("--gossip-addr %s is reachable beyond this host: give --gossip-key-file (or WEIR_GOSSIP_KEY), or --insecure-gossip on an isolated network", gossipAddr))
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together"))
	}
	if s.TLSClientCA != "" && !s.publicTLS() {
		errs = append(errs, errors.New("--tls-client-ca needs --tls-cert and --tls-key"))
	}
	return errs
}

func countSet(vals ...string) int {
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	return n
}

// isLoopback reports whether a listen address host:port is reachable only
// from this host: a loopback IP or "localhost". An empty or unspecified
// host (every interface) and an unparsable address are not.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// gossipKeys returns the gossip keys: the first encrypts, the rest are
// also accepted. None means gossip is not encrypted.
func (s security) gossipKeys() ([][]byte, error) {
	if s.GossipKey != "" {
		k, err := decodeKey(s.GossipKey)
		if err != nil {
			return nil, fmt.Errorf("--gossip-key: %w", err)
		}
		return [][]byte{k}, nil
	}
	if s.GossipKeyFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(s.GossipKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--gossip-key-file: %w", err)
	}
	keys, err := parseKeyFile(b)
	if err != nil {
		return nil, fmt.Errorf("--gossip-key-file %s: %w", s.GossipKeyFile, err)
	}
	return keys, nil
}

// parseKeyFile reads one base64 key a line; blank lines and lines starting
// with # are skipped. At least one key is required.
func parseKeyFile(b []byte) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		t := bytes.TrimSpace(sc.Bytes())
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		k, err := decodeKey(string(t))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no key in the file")
	}
	return keys, nil
}

func decodeKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	switch len(k) {
	case 16, 24, 32:
		return k, nil
	}
	return nil, fmt.Errorf("key is %d bytes, want 16, 24 or 32", len(k))
}

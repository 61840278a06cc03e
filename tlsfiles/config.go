package tlsfiles

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc/credentials"
)

// errNoCert is what a handshake gets when the Store holds no certificate.
var errNoCert = errors.New("tlsfiles: no certificate configured")

// ServerConfig returns a TLS 1.2+ server configuration that presents the
// current certificate. With clientAuth, every client must present a
// certificate that verifies, for client authentication, against the current
// CA bundle (mTLS); Load must then have been given a CAFile, or every
// handshake fails. The config reads the Store on every handshake, so reloads
// apply to new connections without rebuilding the server.
//
// Both checks are callbacks on one config (not GetConfigForClient) so that
// what servers add to the config they are given, such as gRPC's and
// net/http's ALPN protocols, stays in effect.
func (s *Store) ServerConfig(clientAuth bool) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if m := s.current(); m.cert != nil {
			return m.cert, nil
		}
		return nil, errNoCert
	}
	if clientAuth {
		// crypto/tls would verify against ClientCAs fixed here; the
		// callback verifies against the bundle of the moment instead.
		c.ClientAuth = tls.RequireAnyClientCert
		c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			return verifyClient(raw, s.current().roots)
		}
	}
	return c
}

// NodeServerConfig is ServerConfig(true) for a listener whose clients are
// nodes: a client's certificate must chain to the CA bundle and be valid
// for server as well as client authentication, as a node's certificate is
// (a node serves with the certificate it dials with). A client-only
// certificate from the same CA, such as an operator's, is refused.
func (s *Store) NodeServerConfig() *tls.Config {
	c := s.ServerConfig(true)
	c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		return verifyClient(raw, s.current().roots, x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth)
	}
	return c
}

// verifyClient checks a client's chain as crypto/tls does with
// RequireAndVerifyClientCert: the leaf must chain to roots and be valid now
// for client authentication, and for every other usage given.
func verifyClient(raw [][]byte, roots *x509.CertPool, usages ...x509.ExtKeyUsage) error {
	if roots == nil {
		return ErrNoCA
	}
	if len(raw) == 0 {
		return errors.New("tlsfiles: client presented no certificate")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return fmt.Errorf("tlsfiles: client certificate: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if len(usages) == 0 {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	// One Verify per usage: VerifyOptions.KeyUsages accepts a chain valid
	// for any one of them.
	for _, u := range usages {
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{u}})
		if err != nil {
			return fmt.Errorf("tlsfiles: client certificate %q: %w", certs[0].Subject.CommonName, err)
		}
	}
	return nil
}

// CheckSeparateCAs returns an error if any certificate in the PEM bundle
// caFile is, or is issued by, a CA of the bundle rootsFile: certificates
// issued from caFile would then also be trusted by rootsFile's holders. A
// node uses it to keep its operators' CA apart from its peer CA.
func CheckSeparateCAs(caFile, rootsFile string) error {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("tlsfiles: read %s: %w", caFile, err)
	}
	rb, err := os.ReadFile(rootsFile)
	if err != nil {
		return fmt.Errorf("tlsfiles: read %s: %w", rootsFile, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rb) {
		return fmt.Errorf("tlsfiles: %s holds no PEM certificate", rootsFile)
	}
	for len(b) > 0 {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return fmt.Errorf("tlsfiles: %s: %w", caFile, err)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
			return fmt.Errorf("tlsfiles: %q in %s is, or is issued by, a CA in %s", c.Subject.CommonName, caFile, rootsFile)
		}
	}
	return nil
}

// ClientConfig returns a TLS 1.2+ client configuration that presents the
// current certificate (if the Store has one) and verifies the server's
// chain against the CA bundle loaded now (the system roots without a
// CAFile) and its name against serverName (empty: the dialled host).
//
// The certificate is read on every handshake, but RootCAs is fixed when the
// config is built: after a CA rotation, build a new config. gRPC dialers
// should use ClientCredentials, which does that on every handshake.
func (s *Store) ClientConfig(serverName string) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, RootCAs: s.current().roots}
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if m := s.current(); m.cert != nil {
			return m.cert, nil
		}
		return &tls.Certificate{}, nil // no certificate: the server decides
	}
	return c
}

// ClientCredentials returns gRPC transport credentials that handshake with
// a ClientConfig built afresh from the current material each time, so both
// the client certificate and the CA bundle follow reloads. serverName
// overrides the name checked in the server's certificate; empty checks the
// host of the target.
func (s *Store) ClientCredentials(serverName string) credentials.TransportCredentials {
	return &clientCreds{
		TransportCredentials: credentials.NewTLS(s.ClientConfig(serverName)),
		store:                s,
		name:                 serverName,
	}
}

// clientCreds delegates everything but the client handshake to a static
// TLS credential (Info, ServerHandshake), and the handshake to a fresh one.
type clientCreds struct {
	credentials.TransportCredentials
	store *Store
	name  string
}

func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(c.store.ClientConfig(c.name)).ClientHandshake(ctx, authority, raw)
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	return c.store.ClientCredentials(c.name)
}

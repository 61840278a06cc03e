// Package tlstest makes real certificates for tests: a throwaway ECDSA CA
// and leaf certificates it signs, written as PEM files under a test's
// temporary directory, and a mutual-TLS gRPC server on them (ServeGRPC).
// Nothing here is fit for production keys.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/weirhq/weir/tlsfiles"
)

// CA is a self-signed certificate authority that lives for one test.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  []byte // the CA certificate, PEM-encoded
}

// NewCA returns a fresh CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	return newCA(t, name, nil)
}

// NewIntermediate returns a CA named name issued by ca: certificates it
// issues chain to ca too.
func (ca *CA) NewIntermediate(t testing.TB, name string) *CA {
	t.Helper()
	return newCA(t, name, ca)
}

// newCA makes a CA signed by parent, or self-signed when parent is nil.
func newCA(t testing.TB, name string, parent *CA) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent.Cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Issue signs a leaf certificate for cn, valid for both server and client
// authentication (a node's), with hosts (IP literals or DNS names) as its
// SANs. It returns the certificate and its private key, PEM-encoded.
func (ca *CA) Issue(t testing.TB, cn string, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.issue(t, cn, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, hosts)
}

func (ca *CA) issue(t testing.TB, cn string, usages []x509.ExtKeyUsage, hosts []string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// Files are the PEM files of one identity.
type Files struct {
	Cert, Key, CA string
}

// WriteFiles issues a leaf for cn and hosts and writes it, its key and the
// CA certificate into dir as name.crt, name.key and name-ca.crt. Writing
// again under the same name replaces the files (a rotation).
func (ca *CA) WriteFiles(t testing.TB, dir, name, cn string, hosts ...string) Files {
	t.Helper()
	cert, key := ca.Issue(t, cn, hosts...)
	return ca.write(t, dir, name, cert, key)
}

// WriteClientFiles is WriteFiles for a certificate valid for client
// authentication only (an operator's), with no SANs.
func (ca *CA) WriteClientFiles(t testing.TB, dir, name, cn string) Files {
	t.Helper()
	cert, key := ca.issue(t, cn, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil)
	return ca.write(t, dir, name, cert, key)
}

func (ca *CA) write(t testing.TB, dir, name string, cert, key []byte) Files {
	t.Helper()
	f := Files{
		Cert: filepath.Join(dir, name+".crt"),
		Key:  filepath.Join(dir, name+".key"),
		CA:   filepath.Join(dir, name+"-ca.crt"),
	}
	for p, b := range map[string][]byte{f.Cert: cert, f.Key: key, f.CA: ca.PEM} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Store loads f as a node does (certificate, key and a CA that client
// certificates must chain to), failing the test if it does not load.
func (f Files) Store(t testing.TB) *tlsfiles.Store {
	t.Helper()
	s, err := tlsfiles.Load(tlsfiles.Config{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA, RequireCA: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ServeGRPC serves, on a free loopback port with mutual TLS from f (a
// client certificate from f.CA required), the services register adds,
// until the test ends. It returns the address.
func ServeGRPC(t testing.TB, f Files, register func(*grpc.Server)) string {
	t.Helper()
	creds := credentials.NewTLS(f.Store(t).ServerConfig(true))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.Creds(creds))
	register(s)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return lis.Addr().String()
}

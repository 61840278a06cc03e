package client

import (
	"crypto/tls"
	"errors"

	"google.golang.org/grpc/credentials"

	"github.com/weirhq/weir/tlsfiles"
)

// TLSConfig names the files for a TLS connection to a weir node started
// with --tls-cert (and, for mutual TLS, --tls-client-ca). Every field is
// optional: the zero value verifies the node against the system roots.
type TLSConfig struct {
	// CAFile is a PEM bundle the node's certificate must chain to. Empty
	// uses the system roots.
	CAFile string
	// CertFile and KeyFile are this client's PEM certificate and key, for
	// a node that requires client certificates. Both or neither.
	CertFile, KeyFile string
	// ServerName is the name the node's certificate must carry. Empty uses
	// the host of Config.Target.
	ServerName string
}

// Validate reports the first problem with t, or nil. It changes nothing.
func (t TLSConfig) Validate() error {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return errors.New("client: config: TLS certificate and key files go together")
	}
	return nil
}

// Credentials reads t's files and returns gRPC transport credentials for
// dialling weir nodes directly. Client uses the same credentials and also
// re-reads the files when they change; these read them once.
func (t TLSConfig) Credentials() (credentials.TransportCredentials, error) {
	creds, _, err := t.open()
	return creds, err
}

// open returns the credentials and, when t names files, the store that can
// reload them.
func (t TLSConfig) open() (credentials.TransportCredentials, *tlsfiles.Store, error) {
	if err := t.Validate(); err != nil {
		return nil, nil, err
	}
	if t.CAFile == "" && t.CertFile == "" {
		return credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}), nil, nil
	}
	s, err := tlsfiles.Load(tlsfiles.Config{CertFile: t.CertFile, KeyFile: t.KeyFile, CAFile: t.CAFile}, nil)
	if err != nil {
		return nil, nil, err
	}
	return s.ClientCredentials(t.ServerName), s, nil
}

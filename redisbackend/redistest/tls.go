package redistest

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// TLSFiles are the PEM files a TLS Redis serves with: its certificate and
// key, and the CA that client certificates must chain to.
type TLSFiles struct {
	Cert, Key, CA string
}

// TLSServer is a [Server] that also listens for TLS on TLSAddr. Its
// plaintext port ([Server.Addr]) stays open for the readiness check and
// for setup commands; point the code under test at TLSAddr.
type TLSServer struct {
	*Server
	TLSAddr string
}

// StartTLS starts a server like [Start] with a TLS listener on another
// free loopback port. With clientAuth, a TLS client must present a
// certificate from f.CA (mutual TLS); without, it must not need to.
func StartTLS(t testing.TB, f TLSFiles, clientAuth bool, opts ...Option) *TLSServer {
	t.Helper()
	port, err := freePort(false)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	auth := "no"
	if clientAuth {
		auth = "yes"
	}
	opts = append([]Option{WithArgs("--tls-port", strconv.Itoa(port),
		"--tls-cert-file", f.Cert, "--tls-key-file", f.Key, "--tls-ca-cert-file", f.CA,
		"--tls-auth-clients", auth)}, opts...)
	return &TLSServer{Server: Start(t, opts...), TLSAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
}

// WithACL defines ACL users, each a line as redis.conf's "user" directive
// takes after its keyword: "weir on >secret ~weir:* -@all +get". The
// readiness check and [Server.Client] use the default user, so keep it able
// to run PING at least ("default on nopass -@all +ping"), and define a user
// with the rights setup needs.
func WithACL(users ...string) Option {
	return func(o *options) {
		for _, u := range users {
			o.args = append(o.args, "--user")
			o.args = append(o.args, strings.Fields(u)...)
		}
	}
}

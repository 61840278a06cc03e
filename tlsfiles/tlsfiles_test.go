package tlsfiles_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/weirhq/weir/tlsfiles"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

// exchange runs one TLS connection over loopback: the server handshakes and
// writes one byte, the client handshakes and reads it. It returns the
// server's error, the client's error and the common name of the
// certificate the client saw.
func exchange(t *testing.T, server, client *tls.Config) (srvErr, cliErr error, serverCN string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	done := make(chan error, 1)
	go func() {
		raw, err := lis.Accept()
		if err != nil {
			done <- err
			return
		}
		conn := tls.Server(raw, server)
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if err := conn.Handshake(); err != nil {
			done <- err
			return
		}
		_, err = conn.Write([]byte{1})
		done <- err
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", lis.Addr().String(), client)
	if err == nil {
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		// With TLS 1.3 the server checks the client's certificate after the
		// client's handshake has returned; the read reports its verdict.
		_, err = io.ReadFull(conn, make([]byte, 1))
		if err == nil {
			serverCN = conn.ConnectionState().PeerCertificates[0].Subject.CommonName
		}
	}
	return <-done, err, serverCN
}

func load(t *testing.T, f tlstest.Files) *tlsfiles.Store {
	t.Helper()
	s, err := tlsfiles.Load(tlsfiles.Config{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA, RequireCA: true, PollInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStore_mutualTLS_sameCAConnects(t *testing.T) {
	ca, dir := tlstest.NewCA(t, "ca"), t.TempDir()
	srv := load(t, ca.WriteFiles(t, dir, "srv", "server", "127.0.0.1"))
	cli := load(t, ca.WriteFiles(t, dir, "cli", "client"))
	srvErr, cliErr, cn := exchange(t, srv.ServerConfig(true), cli.ClientConfig("127.0.0.1"))
	if srvErr != nil || cliErr != nil || cn != "server" {
		t.Fatalf("server %v, client %v, cn %q: want a connection to \"server\"", srvErr, cliErr, cn)
	}
}

func TestStore_ServerConfig_refusesClientWithoutCertificate(t *testing.T) {
	ca, dir := tlstest.NewCA(t, "ca"), t.TempDir()
	srv := load(t, ca.WriteFiles(t, dir, "srv", "server", "127.0.0.1"))
	noCert, err := tlsfiles.Load(tlsfiles.Config{CAFile: srvFilesCA(dir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srvErr, cliErr, _ := exchange(t, srv.ServerConfig(true), noCert.ClientConfig("127.0.0.1"))
	if srvErr == nil || cliErr == nil {
		t.Fatalf("server %v, client %v: want both to fail", srvErr, cliErr)
	}
	if !strings.Contains(srvErr.Error(), "certificate") {
		t.Fatalf("server error %q does not name the missing certificate", srvErr)
	}
}

func TestStore_ServerConfig_refusesClientOfAnotherCA(t *testing.T) {
	dir := t.TempDir()
	srv := load(t, tlstest.NewCA(t, "ca").WriteFiles(t, dir, "srv", "server", "127.0.0.1"))
	tlstest.NewCA(t, "rogue").WriteFiles(t, dir, "rogue", "rogue")
	// The rogue client trusts the real server's CA, so only the server's
	// check of the client certificate can fail.
	trusting, err := tlsfiles.Load(tlsfiles.Config{CertFile: dir + "/rogue.crt", KeyFile: dir + "/rogue.key", CAFile: dir + "/srv-ca.crt"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srvErr, cliErr, _ := exchange(t, srv.ServerConfig(true), trusting.ClientConfig("127.0.0.1"))
	if srvErr == nil || cliErr == nil {
		t.Fatalf("server %v, client %v: want the rogue client refused", srvErr, cliErr)
	}
}

func TestStore_ClientConfig_refusesServerOfAnotherCA(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	rogueSrv := load(t, tlstest.NewCA(t, "rogue").WriteFiles(t, dir, "rogue", "server", "127.0.0.1"))
	cli := load(t, ca.WriteFiles(t, dir, "cli", "client"))
	srvErr, cliErr, _ := exchange(t, rogueSrv.ServerConfig(false), cli.ClientConfig("127.0.0.1"))
	if cliErr == nil || !strings.Contains(cliErr.Error(), "unknown authority") {
		t.Fatalf("client error %v: want an unknown-authority refusal (server: %v)", cliErr, srvErr)
	}
}

func TestStore_ClientConfig_refusesWrongServerName(t *testing.T) {
	ca, dir := tlstest.NewCA(t, "ca"), t.TempDir()
	srv := load(t, ca.WriteFiles(t, dir, "srv", "server", "10.9.9.9", "other.example"))
	cli := load(t, ca.WriteFiles(t, dir, "cli", "client"))
	for _, name := range []string{"127.0.0.1", "weir.example"} {
		if _, cliErr, _ := exchange(t, srv.ServerConfig(false), cli.ClientConfig(name)); cliErr == nil {
			t.Errorf("server name %q: client accepted a certificate for other names", name)
		}
	}
	if _, cliErr, _ := exchange(t, srv.ServerConfig(false), cli.ClientConfig("other.example")); cliErr != nil {
		t.Errorf("matching DNS name refused: %v", cliErr)
	}
}

func TestStore_Run_picksUpNewCertificate(t *testing.T) {
	ca, dir := tlstest.NewCA(t, "ca"), t.TempDir()
	srv := load(t, ca.WriteFiles(t, dir, "srv", "first", "127.0.0.1"))
	cli := load(t, ca.WriteFiles(t, dir, "cli", "client"))
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })
	srvCfg, cliCfg := srv.ServerConfig(true), cli.ClientConfig("127.0.0.1")
	if _, _, cn := exchange(t, srvCfg, cliCfg); cn != "first" {
		t.Fatalf("before rotation the server presented %q", cn)
	}

	ca.WriteFiles(t, dir, "srv", "second-certificate", "127.0.0.1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, cn := exchange(t, srvCfg, cliCfg)
		if cn == "second-certificate" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after rotation the server still presents %q", cn)
		}
	}
}

func TestStore_Reload_badFilesKeepThePreviousCertificate(t *testing.T) {
	ca, dir := tlstest.NewCA(t, "ca"), t.TempDir()
	f := ca.WriteFiles(t, dir, "srv", "server", "127.0.0.1")
	srv := load(t, f)
	cli := load(t, ca.WriteFiles(t, dir, "cli", "client"))
	other, _ := ca.Issue(t, "other", "127.0.0.1")
	if err := os.WriteFile(f.Cert, other, 0o600); err != nil { // key no longer matches
		t.Fatal(err)
	}
	if err := srv.Reload(); err == nil {
		t.Fatal("Reload accepted a certificate that does not match its key")
	}
	if _, cliErr, cn := exchange(t, srv.ServerConfig(true), cli.ClientConfig("127.0.0.1")); cliErr != nil || cn != "server" {
		t.Fatalf("after a failed reload: client %v, cn %q; want the previous certificate", cliErr, cn)
	}
}

func TestLoad_errors(t *testing.T) {
	ca, dir := tlstest.NewCA(t, "ca"), t.TempDir()
	f := ca.WriteFiles(t, dir, "srv", "server")
	garbage := dir + "/garbage.pem"
	if err := os.WriteFile(garbage, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]tlsfiles.Config{
		"nothing":           {},
		"cert without key":  {CertFile: f.Cert},
		"key without cert":  {KeyFile: f.Key, CAFile: f.CA},
		"mTLS without CA":   {CertFile: f.Cert, KeyFile: f.Key, RequireCA: true},
		"missing cert file": {CertFile: dir + "/nope", KeyFile: f.Key},
		"CA not PEM":        {CAFile: garbage},
		"negative poll":     {CAFile: f.CA, PollInterval: -time.Second},
	} {
		if _, err := tlsfiles.Load(c, nil); err == nil || !strings.HasPrefix(err.Error(), "tlsfiles: ") {
			t.Errorf("%s: Load error %v, want a tlsfiles error", name, err)
		}
	}
	if _, err := tlsfiles.Load(tlsfiles.Config{CertFile: f.Cert, KeyFile: f.Key, RequireCA: true}, nil); !errors.Is(err, tlsfiles.ErrNoCA) {
		t.Errorf("mTLS without CA: %v, want ErrNoCA", err)
	}
}

func srvFilesCA(dir string) string { return dir + "/srv-ca.crt" }

// TestStore_ClientCredentials_followsCARotation rotates the CA a client
// trusts from the old to the new one: the gRPC credentials refuse the
// server before the reload and accept it after, without being rebuilt.
func TestStore_ClientCredentials_followsCARotation(t *testing.T) {
	dir := t.TempDir()
	oldCA, newCA := tlstest.NewCA(t, "old"), tlstest.NewCA(t, "new")
	srv := load(t, newCA.WriteFiles(t, dir, "srv", "server", "127.0.0.1"))
	f := oldCA.WriteFiles(t, dir, "cli", "client")
	cli := load(t, f)
	creds := cli.ClientCredentials("")
	if err := grpcHandshake(t, srv.ServerConfig(false), creds); err == nil {
		t.Fatal("a client trusting only the old CA accepted the new CA's server")
	}
	if err := os.WriteFile(f.CA, append(oldCA.PEM, newCA.PEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cli.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := grpcHandshake(t, srv.ServerConfig(false), creds); err != nil {
		t.Fatalf("after adding the new CA: %v", err)
	}
}

// grpcHandshake runs creds' client handshake against a TLS server on
// loopback, with the authority gRPC would pass for an IP target.
func grpcHandshake(t *testing.T, server *tls.Config, creds credentials.TransportCredentials) error {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	server.NextProtos = []string{"h2"} // what a gRPC server adds
	go func() {
		if raw, err := lis.Accept(); err == nil {
			conn := tls.Server(raw, server)
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			conn.Handshake()
			conn.Close()
		}
	}()
	raw, err := net.DialTimeout("tcp", lis.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := creds.ClientHandshake(ctx, lis.Addr().String(), raw)
	if err == nil {
		conn.Close()
	}
	return err
}

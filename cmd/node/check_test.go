package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/tlsfiles/tlstest"
)

// busyAddrs holds n loopback listeners open for the test and returns their
// addresses: a node that tried to listen on one would fail.
func busyAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		out = append(out, l.Addr().String())
	}
	return out
}

func runCheck(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := run(args, func(k string) string { return env[k] }, &out)
	return code, out.String()
}

func TestRun_check_defaultsPassWithoutListening(t *testing.T) {
	busy := busyAddrs(t, 4)
	code, out := runCheck(t, nil, "--check", "--grpc-addr", busy[0], "--http-addr", busy[1], "--peer-addr", busy[2], "--admin-addr", busy[3])
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	for _, want := range []string{"configuration valid", "policy: built-in, version builtin.1", "store: embedded", "cluster: of one", "tls: none"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	// The defaults themselves, as a new user meets them.
	if code, out := runCheck(t, nil, "--check"); code != 0 {
		t.Errorf("--check with the default flags: exit %d\n%s", code, out)
	}
	if code, out := runCheck(t, map[string]string{"WEIR_CHECK": "true"}); code != 0 || !strings.Contains(out, "configuration valid") {
		t.Errorf("WEIR_CHECK=true: exit %d\n%s", code, out)
	}
}

func TestRun_check_securedClusterSummaryHidesKeys(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "peer-ca")
	peer := ca.WriteFiles(t, dir, "peer", "weir-a", "127.0.0.1")
	public := tlstest.NewCA(t, "public-ca").WriteFiles(t, dir, "public", "weir", "127.0.0.1")
	keyFile, keys := writeGossipKeys(t, 2)
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte("version: v9\nlimits:\n  - {name: per-user, match: [user], rate: 5/s, burst: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	busy := busyAddrs(t, 1)
	code, out := runCheck(t, nil, "--check", "--policy", policyFile,
		"--gossip-addr", busy[0], "--gossip-key-file", keyFile, "--join", "127.0.0.1:7946",
		"--peer-tls-cert", peer.Cert, "--peer-tls-key", peer.Key, "--peer-tls-ca", peer.CA,
		"--tls-cert", public.Cert, "--tls-key", public.Key, "--redis-addr", "127.0.0.1:1")
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	for _, want := range []string{"policy: " + policyFile + ", version v9, 1 limit(s)", "2 key(s)", "tls: public, peer (mutual)", "store: redis redis://127.0.0.1:1 (not contacted)", "gossip: " + busy[0]} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	for _, k := range keys {
		if strings.Contains(out, k) {
			t.Errorf("summary shows gossip key material:\n%s", out)
		}
	}
}

func TestRun_check_redisPasswordNeverShown(t *testing.T) {
	const secret = "s3cret-in-url"
	code, out := runCheck(t, nil, "--check", "--redis-url", "redis://weir:"+secret+"@127.0.0.1:1/2")
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	if strings.Contains(out, secret) || !strings.Contains(out, "store: redis redis://weir:") {
		t.Errorf("summary shows the password or no Redis target:\n%s", out)
	}
}

func TestRun_check_badFilesFailNamingTheFlag(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca := tlstest.NewCA(t, "ca")
	good := ca.WriteFiles(t, dir, "good", "weir", "127.0.0.1")
	other := ca.WriteFiles(t, dir, "other", "weir", "127.0.0.1")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing policy", []string{"--policy", filepath.Join(dir, "none.yaml")}, "--policy"},
		{"invalid policy", []string{"--policy", write("bad.yaml", "limits:\n  - {name: x, rate: fast}\n")}, "--policy"},
		{"missing certificate", []string{"--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", good.Key}, "--tls-cert"},
		{"key of another certificate", []string{"--tls-cert", good.Cert, "--tls-key", other.Key}, "--tls-cert"},
		{"bad gossip key file", []string{"--gossip-addr", "127.0.0.1:0", "--gossip-key-file", write("gossip.key", "not base64!\n")}, "--gossip-key-file"},
		{"peer CA missing", []string{"--peer-tls-cert", good.Cert, "--peer-tls-key", good.Key, "--peer-tls-ca", filepath.Join(dir, "none-ca.crt")}, "--peer-tls-cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runCheck(t, nil, append([]string{"--check"}, tc.args...)...)
			if code != 1 || !strings.Contains(out, "check failed") || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want 1 with an error naming %s:\n%s", code, tc.want, out)
			}
		})
	}
	if code, out := runCheck(t, nil, "--check", "--redis-timeout", "0s"); code != 2 || !strings.Contains(out, "--redis-timeout") {
		t.Errorf("a bad flag: exit %d, want 2 naming it:\n%s", code, out)
	}
}

func TestCheck_wildcardWithoutReachableAddressFails(t *testing.T) {
	cfg, err := parseConfig([]string{"--check", "--gossip-addr", "0.0.0.0:7946", "--insecure-gossip", "--peer-addr", "0.0.0.0:8091", "--insecure-peer"}, envMap(), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := check(cfg, (&fakeHost{name: "box"}).src(), &out); err == nil || !strings.Contains(err.Error(), "--advertise-addr") {
		t.Errorf("no reachable address: %v, want an error naming --advertise-addr", err)
	}
	out.Reset()
	if err := check(cfg, (&fakeHost{private: []string{"10.89.0.5"}}).src(), &out); err != nil || !strings.Contains(out.String(), "0.0.0.0:7946 advertised as 10.89.0.5:7946") || !strings.Contains(out.String(), "peer 10.89.0.5:8091") {
		t.Errorf("with a private address: %v\n%s", err, out.String())
	}
}

package main

import (
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envMap(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestParseConfig_badEnvironmentValueFails(t *testing.T) {
	for _, tc := range []struct{ env, value string }{
		{"WEIR_REDIS_TIMEOUT", "50"},
		{"WEIR_FORWARD_TIMEOUT", "fast"},
		{"WEIR_INSECURE_PEER", "yes please"},
	} {
		_, err := parseConfig(nil, envMap(tc.env, tc.value), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.env) {
			t.Errorf("%s=%q: error %v, want one naming the variable", tc.env, tc.value, err)
		}
	}
	c, err := parseConfig(nil, envMap("WEIR_REDIS_TIMEOUT", "75ms", "WEIR_INSECURE_GOSSIP", "true"), io.Discard)
	if err != nil || c.RedisTimeout != 75*time.Millisecond || !c.InsecureGossip {
		t.Fatalf("good environment: %+v %v", c, err)
	}
	c, err = parseConfig([]string{"--redis-timeout", "10ms"}, envMap("WEIR_REDIS_TIMEOUT", "75ms"), io.Discard)
	if err != nil || c.RedisTimeout != 10*time.Millisecond {
		t.Fatalf("a flag must win over the environment: %v %v", c.RedisTimeout, err)
	}
}

func TestParseConfig_noFlagsIsLoopbackPlaintext(t *testing.T) {
	c, err := parseConfig(nil, envMap(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{c.GRPCAddr, c.HTTPAddr, c.PeerAddr, c.AdminAddr} {
		if !isLoopback(a) {
			t.Errorf("default address %s is not loopback", a)
		}
	}
}

// writeGossipKeys writes n fresh base64 keys, one a line, and returns the
// path and the keys.
func writeGossipKeys(t *testing.T, n int) (string, []string) {
	t.Helper()
	var keys []string
	for i := range n {
		k := make([]byte, 16)
		for j := range k {
			k[j] = byte(i*16 + j + 1)
		}
		keys = append(keys, base64.StdEncoding.EncodeToString(k))
	}
	path := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(path, []byte("# primary first\n"+strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, keys
}

func TestParseConfig_exposure(t *testing.T) {
	keyFile, _ := writeGossipKeys(t, 1)
	peerTLS := []string{"--peer-tls-cert", "c.pem", "--peer-tls-key", "k.pem", "--peer-tls-ca", "ca.pem"}
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"peer on all interfaces", []string{"--peer-addr", "0.0.0.0:8091"}, "--insecure-peer"},
		{"peer on a LAN IP", []string{"--peer-addr", "10.1.2.3:8091"}, "--peer-tls-cert"},
		{"peer with mTLS", append([]string{"--peer-addr", "0.0.0.0:8091"}, peerTLS...), ""},
		{"peer insecure", []string{"--peer-addr", "0.0.0.0:8091", "--insecure-peer"}, ""},
		{"admin on all interfaces", []string{"--admin-addr", "0.0.0.0:8092"}, "--admin-addr 0.0.0.0:8092 is reachable"},
		{"admin with peer mTLS", append([]string{"--admin-addr", "0.0.0.0:8092"}, peerTLS...), ""},
		{"admin insecure", []string{"--admin-addr", "0.0.0.0:8092", "--insecure-peer"}, ""},
		{"admin disabled", []string{"--admin-addr", ""}, ""},
		{"peer half TLS", []string{"--peer-tls-cert", "c.pem", "--peer-tls-key", "k.pem"}, "go together"},
		{"join without gossip addr", []string{"--join", "10.0.0.1:7946"}, "--join needs --gossip-addr"},
		{"gossip open", []string{"--gossip-addr", "10.0.0.2:7946", "--peer-addr", "10.0.0.2:8091", "--insecure-peer"}, "--insecure-gossip"},
		{"gossip keyed", []string{"--gossip-addr", "10.0.0.2:7946", "--gossip-key-file", keyFile, "--peer-addr", "10.0.0.2:8091", "--insecure-peer"}, ""},
		{"gossip insecure", []string{"--gossip-addr", "10.0.0.2:7946", "--insecure-gossip", "--peer-addr", "10.0.0.2:8091", "--insecure-peer"}, ""},
		{"gossip loopback", []string{"--gossip-addr", "127.0.0.1:7946"}, ""},
		{"gossip out, peer loopback", []string{"--gossip-addr", "10.0.0.2:7946", "--insecure-gossip"}, "could not forward"},
		{"two gossip keys", []string{"--gossip-key", "x", "--gossip-key-file", keyFile}, "exclusive"},
		{"tls cert alone", []string{"--tls-cert", "c.pem"}, "go together"},
		{"client CA alone", []string{"--tls-client-ca", "ca.pem"}, "--tls-client-ca needs"},
	} {
		_, err := parseConfig(tc.args, envMap(), io.Discard)
		if tc.wantErr == "" && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestParseKeyFile(t *testing.T) {
	path, keys := writeGossipKeys(t, 3)
	got, err := security{GossipKeyFile: path}.gossipKeys()
	if err != nil || len(got) != 3 || base64.StdEncoding.EncodeToString(got[0]) != keys[0] {
		t.Fatalf("keys %d %v, want 3 with the first line first", len(got), err)
	}
	for name, body := range map[string]string{
		"empty":     "# nothing\n\n",
		"not b64":   "!!!\n",
		"short key": base64.StdEncoding.EncodeToString([]byte("short")) + "\n",
	} {
		if _, err := parseKeyFile([]byte(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := (security{GossipKeyFile: filepath.Join(t.TempDir(), "missing")}).gossipKeys(); err == nil {
		t.Error("a missing key file was accepted")
	}
}

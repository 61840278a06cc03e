package main

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/weirhq/weir/redisconn"
)

func parseRedis(t *testing.T, env map[string]string, args ...string) (config, error) {
	t.Helper()
	return parseConfig(args, func(k string) string { return env[k] }, io.Discard)
}

func TestRedisFlags_parse_forms(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want redisconn.Config
	}{
		{"no redis", nil, nil, redisconn.Config{}},
		{"addr", []string{"--redis-addr", "r:6379"}, nil,
			redisconn.Config{Mode: redisconn.Single, Addrs: []string{"r:6379"}}},
		{"url with user, db and options", []string{"--redis-url", "rediss://weir:pw@r:6380/2?client_name=edge&protocol=2"}, nil,
			redisconn.Config{Mode: redisconn.Single, Addrs: []string{"r:6380"}, Username: "weir", Password: "pw", DB: 2, ClientName: "edge", Protocol: 2, TLS: redisconn.TLS{Enabled: true}}},
		{"url from the environment, password from a file", []string{"--redis-password-file", "/run/pw"}, map[string]string{"WEIR_REDIS_URL": "redis://r", "WEIR_REDIS_USERNAME": "weir"},
			redisconn.Config{Mode: redisconn.Single, Addrs: []string{"r:6379"}, Username: "weir", PasswordFile: "/run/pw"}},
		{"cluster urls", []string{"--redis-cluster", "rediss://a:7000,b:7001", "--redis-tls-ca", "/ca"}, nil,
			redisconn.Config{Mode: redisconn.Cluster, Addrs: []string{"a:7000", "b:7001"}, TLS: redisconn.TLS{Enabled: true, CAFile: "/ca"}}},
		{"cluster bare seeds with tls flags", []string{"--redis-cluster", "a:7000,b:7001", "--redis-tls-ca", "/ca", "--redis-tls-server-name", "redis.internal"}, nil,
			redisconn.Config{Mode: redisconn.Cluster, Addrs: []string{"a:7000", "b:7001"}, TLS: redisconn.TLS{Enabled: true, CAFile: "/ca", ServerName: "redis.internal"}}},
		{"sentinel", []string{"--redis-sentinel", "mymaster@s1,s2:5000", "--redis-sentinel-password-file", "/spw", "--redis-tls-cert", "/c", "--redis-tls-key", "/k"}, nil,
			redisconn.Config{Mode: redisconn.Sentinel, MasterName: "mymaster", Addrs: []string{"s1:26379", "s2:5000"}, SentinelPasswordFile: "/spw",
				TLS: redisconn.TLS{Enabled: true, CertFile: "/c", KeyFile: "/k"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseRedis(t, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.Mode != 0 {
				tc.want.Timeout = cfg.RedisTimeout
			}
			if !reflect.DeepEqual(cfg.conn, tc.want) {
				t.Fatalf("conn = %+v\nwant   %+v", cfg.conn, tc.want)
			}
			if cfg.redisConfigured() != (tc.want.Mode != 0) {
				t.Fatalf("redisConfigured = %v", cfg.redisConfigured())
			}
		})
	}
}

func TestRedisFlags_parse_rejectsNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--redis-addr", "a:1", "--redis-url", "redis://b"}, nil, "--redis-addr and --redis-url are exclusive"},
		{[]string{"--redis-cluster", "a:1", "--redis-sentinel", "m@s:1"}, nil, "--redis-cluster and --redis-sentinel are exclusive"},
		{[]string{"--redis-addr", "a:1"}, map[string]string{"WEIR_REDIS_URL": "redis://b"}, "--redis-addr and --redis-url are exclusive"},
		{[]string{"--redis-url", "redis://weir:hunter2@r:bad"}, nil, "--redis-url: redis://weir:xxxxx@r:bad"},
		{[]string{"--redis-url", "redis://r?timeout=1s"}, nil, `--redis-url: redis://r?timeout=1s: unknown option "timeout"`},
		{[]string{"--redis-url", "redis://r/x"}, nil, "--redis-url: redis://r/x: database"},
		{[]string{"--redis-addr", "redis://r"}, nil, "--redis-addr: takes host:port"},
		{[]string{"--redis-addr", "r:99999"}, nil, "--redis-addr: address"},
		{[]string{"--redis-cluster", "redis://a/1"}, nil, "--redis-cluster: redis://a/1: database 1"},
		{[]string{"--redis-cluster", "redis://u:hunter2@a,redis://u:other@b"}, nil, "--redis-cluster: redis://u:xxxxx@a and redis://u:xxxxx@b differ"},
		{[]string{"--redis-sentinel", "s1:26379"}, nil, "--redis-sentinel: "},
		{[]string{"--redis-username", "weir"}, nil, "--redis-username: no Redis to apply to"},
		{[]string{"--redis-tls-ca", "/ca"}, nil, "--redis-tls-ca: no Redis to apply to"},
		{[]string{"--redis-addr", "a:1", "--redis-username", "weir"}, nil, "--redis-username needs --redis-password-file"},
		{[]string{"--redis-url", "redis://u:hunter2@a", "--redis-password-file", "/pw"}, nil, "--redis-password-file and the password in --redis-url are exclusive"},
		{[]string{"--redis-url", "redis://u:hunter2@a", "--redis-username", "v"}, nil, "--redis-username and the user in --redis-url are exclusive"},
		{[]string{"--redis-addr", "a:1", "--redis-sentinel-password-file", "/spw"}, nil, "--redis-sentinel-password-file needs --redis-sentinel"},
		{[]string{"--redis-url", "redis://a", "--redis-tls-ca", "/ca"}, nil, "--redis-tls-ca given but --redis-url says redis:// (plaintext): use rediss://"},
		{[]string{"--redis-addr", "a:1", "--redis-tls-cert", "/c"}, nil, "--redis-tls-cert and --redis-tls-key go together"},
		{[]string{"--redis-addr", "a:1", "--redis-timeout", "0s"}, nil, "--redis-timeout 0s must be positive"},
	} {
		_, err := parseRedis(t, tc.env, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %v: err = %v, want it to contain %q", tc.args, tc.env, err, tc.want)
			continue
		}
		for _, secret := range []string{"hunter2", "other"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%q: the error shows a password: %v", tc.args, err)
			}
		}
	}
}

// TestRedisFlags_usageNeverShowsEnvironmentPassword: a URL in
// WEIR_REDIS_URL is applied as the flag's value, not its default, so the
// usage text a bad flag prints does not show it.
func TestRedisFlags_usageNeverShowsEnvironmentPassword(t *testing.T) {
	var stderr bytes.Buffer
	env := map[string]string{"WEIR_REDIS_URL": "redis://weir:hunter2@r", "WEIR_REDIS_CLUSTER": "redis://weir:hunter2@a"}
	_, err := parseConfig([]string{"--no-such-flag"}, func(k string) string { return env[k] }, &stderr)
	if err == nil {
		t.Fatal("a bad flag was accepted")
	}
	if !strings.Contains(stderr.String(), "-redis-url") {
		t.Fatalf("no usage printed:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "hunter2") {
		t.Fatalf("the usage text shows the password:\n%s", stderr.String())
	}
}

package redisconn_test

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/redisconn"
)

func TestConfig_Validate(t *testing.T) {
	ok := redisconn.DefaultConfig()
	ok.Mode, ok.Addrs = redisconn.Single, []string{"r:6379"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		name string
		mut  func(*redisconn.Config)
		want string
	}{
		{"no mode", func(c *redisconn.Config) { c.Mode = 0 }, "Mode"},
		{"two addrs single", func(c *redisconn.Config) { c.Addrs = []string{"a:1", "b:1"} }, "one address"},
		{"bad addr", func(c *redisconn.Config) { c.Addrs = []string{"nope"} }, "host:port"},
		{"master without sentinel", func(c *redisconn.Config) { c.MasterName = "m" }, "MasterName"},
		{"sentinel without master", func(c *redisconn.Config) { c.Mode = redisconn.Sentinel }, "MasterName"},
		{"db on cluster", func(c *redisconn.Config) { c.Mode, c.DB = redisconn.Cluster, 1 }, "DB"},
		{"both passwords", func(c *redisconn.Config) { c.Password, c.PasswordFile = "p", "f" }, "exclusive"},
		{"user without password", func(c *redisconn.Config) { c.Username = "weir" }, "Username"},
		{"protocol", func(c *redisconn.Config) { c.Protocol = 4 }, "Protocol"},
		{"cert without key", func(c *redisconn.Config) { c.TLS = redisconn.TLS{Enabled: true, CertFile: "c"} }, "KeyFile"},
		{"files without tls", func(c *redisconn.Config) { c.TLS = redisconn.TLS{CAFile: "ca"} }, "Enabled"},
		{"timeout", func(c *redisconn.Config) { c.Timeout = 0 }, "Timeout"},
		{"sentinel password off sentinel", func(c *redisconn.Config) { c.SentinelPasswordFile = "f" }, "Sentinel"},
	} {
		c := ok
		c.Addrs = append([]string(nil), ok.Addrs...)
		tc.mut(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

func TestConfig_String_neverShowsPassword(t *testing.T) {
	c := redisconn.DefaultConfig()
	c.Mode, c.Addrs, c.Username, c.Password, c.DB = redisconn.Single, []string{"r:6380"}, "weir", "hunter2", 2
	c.TLS.Enabled = true
	if got, want := c.String(), "rediss://weir:xxxxx@r:6380/2"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	c.Password, c.PasswordFile = "", "/run/secrets/p"
	if got := c.String(); !strings.Contains(got, "(password from /run/secrets/p)") {
		t.Fatalf("String() = %q", got)
	}
	s := redisconn.Config{Mode: redisconn.Sentinel, MasterName: "m", Addrs: []string{"s1:26379", "s2:26379"}}
	if got, want := s.String(), "sentinel m@redis://s1:26379,s2:26379"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

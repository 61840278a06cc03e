package membership

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestConfig_Validate(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.NodeName = "a"
		return c
	}
	mod := func(f func(*Config)) Config {
		c := valid()
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"default", valid(), ""},
		{"local port 0", mod(func(c *Config) { c.BindAddr, c.Profile = "127.0.0.1:0", ProfileLocal }), ""},
		{"ipv6", mod(func(c *Config) { c.BindAddr, c.AdvertiseAddr = "[::1]:7946", "[::1]:0" }), ""},
		{"dns seed", mod(func(c *Config) { c.Join = []string{"weir-0.weir.svc:7946"} }), ""},
		{"key 32", mod(func(c *Config) { c.SecretKey = make([]byte, 32) }), ""},
		{"no name", mod(func(c *Config) { c.NodeName = "" }), "node name"},
		{"bind host name", mod(func(c *Config) { c.BindAddr = "localhost:7946" }), "not an IP"},
		{"bind no port", mod(func(c *Config) { c.BindAddr = "127.0.0.1" }), "bind address"},
		{"bind bad port", mod(func(c *Config) { c.BindAddr = "127.0.0.1:70000" }), "bad port"},
		{"advertise no port", mod(func(c *Config) { c.AdvertiseAddr = "10.0.0.1" }), "advertise"},
		{"seed no port", mod(func(c *Config) { c.Join = []string{"weir-0"} }), "seed"},
		{"zero rejoin", mod(func(c *Config) { c.RejoinInterval = 0 }), "rejoin"},
		{"key 15", mod(func(c *Config) { c.SecretKey = make([]byte, 15) }), "secret key"},
		{"secondary keys", mod(func(c *Config) { c.SecretKey, c.SecondaryKeys = make([]byte, 16), [][]byte{make([]byte, 24)} }), ""},
		{"secondary without primary", mod(func(c *Config) { c.SecondaryKeys = [][]byte{make([]byte, 16)} }), "without a secret key"},
		{"secondary key 20", mod(func(c *Config) { c.SecretKey, c.SecondaryKeys = make([]byte, 16), [][]byte{make([]byte, 20)} }), "secondary key 1"},
		{"profile", mod(func(c *Config) { c.Profile = "wan" }), "profile"},
		{"huge meta", mod(func(c *Config) { c.Region = strings.Repeat("x", memberlist.MetaMaxSize) }), "metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.cfg.Join
			err := tt.cfg.Validate()
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
			if len(before) != len(tt.cfg.Join) {
				t.Fatal("Validate changed the config")
			}
		})
	}
}

func TestConfig_memberlistConfig(t *testing.T) {
	c := Config{
		NodeName: "a", BindAddr: "127.0.0.1:7000", AdvertiseAddr: "10.1.2.3:0",
		RejoinInterval: time.Second, Profile: ProfileLocal, SecretKey: []byte("0123456789abcdef"),
	}
	mc := c.memberlistConfig()
	if mc.Name != "a" || mc.BindAddr != "127.0.0.1" || mc.BindPort != 7000 ||
		mc.AdvertiseAddr != "10.1.2.3" || mc.AdvertisePort != 7000 {
		t.Fatalf("got name %q bind %s:%d advertise %s:%d", mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertiseAddr, mc.AdvertisePort)
	}
	if mc.ProbeInterval != memberlist.DefaultLocalConfig().ProbeInterval {
		t.Fatalf("local profile not applied: probe interval %v", mc.ProbeInterval)
	}
	c.SecretKey[0] = 'X'
	if mc.SecretKey[0] != '0' {
		t.Fatal("memberlist config shares the caller's key slice")
	}
}

func TestMeta_roundTrip(t *testing.T) {
	b := meta{GRPCAddr: "10.0.0.1:8081", PeerAddr: "10.0.0.1:8091", Region: "eu-west-1"}.encode()
	if got := decodeMeta(b); got.GRPCAddr != "10.0.0.1:8081" || got.PeerAddr != "10.0.0.1:8091" || got.Region != "eu-west-1" {
		t.Fatalf("decodeMeta(%s) = %+v", b, got)
	}
	if got := decodeMeta([]byte("not json")); got != (meta{}) {
		t.Fatalf("decodeMeta(garbage) = %+v, want zero", got)
	}
	if got := newDelegate(b).NodeMeta(len(b) - 1); got != nil {
		t.Fatalf("NodeMeta over the limit = %q, want nil", got)
	}
}

func TestLogWriter_Write(t *testing.T) {
	var buf bytes.Buffer
	w := logWriter{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, line := range []string{
		"[DEBUG] memberlist: Stream connection from=127.0.0.1:1\n",
		"[WARN] memberlist: Was able to connect to b over TCP but UDP probes failed\n",
		"[ERR] memberlist: Failed fallback ping\n",
		"[INFO] memberlist: Marking b as failed\n",
		"no level at all\n",
	} {
		if n, err := w.Write([]byte(line)); err != nil || n != len(line) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	got := buf.String()
	for _, want := range []string{
		`level=DEBUG msg="Stream connection from=127.0.0.1:1" component=memberlist`,
		`level=WARN msg="Was able to connect`,
		`level=ERROR msg="Failed fallback ping"`,
		`level=INFO msg="Marking b as failed"`,
		`level=INFO msg="no level at all"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log output lacks %q:\n%s", want, got)
		}
	}
}

package redisconn_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/weirhq/weir/redisconn"
)

func TestParseURL_forms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want redisconn.Endpoint
	}{
		{"redis.internal:6380", redisconn.Endpoint{Addrs: []string{"redis.internal:6380"}}},
		{"redis.internal", redisconn.Endpoint{Addrs: []string{"redis.internal:6379"}}},
		{"redis://10.0.0.1", redisconn.Endpoint{Addrs: []string{"10.0.0.1:6379"}}},
		{"redis://[::1]:7000/3", redisconn.Endpoint{Addrs: []string{"[::1]:7000"}, DB: 3}},
		{"rediss://weir:s3cr%40t@r:6380/0?client_name=edge&protocol=2", redisconn.Endpoint{
			Addrs: []string{"r:6380"}, Username: "weir", Password: "s3cr@t", TLS: true, ClientName: "edge", Protocol: 2}},
		{"redis://:onlypass@r", redisconn.Endpoint{Addrs: []string{"r:6379"}, Password: "onlypass"}},
	} {
		got, err := redisconn.ParseURL(tc.in)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseURL(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestParseURL_rejectsWithoutShowingPassword(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://u:hunter2@r", "scheme"},
		{"redis://u:hunter2@r:notaport", "invalid port"},
		{"redis://u:hunter2@r:0", "port"},
		{"redis://u:hunter2@r/x", "database"},
		{"redis://u:hunter2@r/-1", "database"},
		{"redis://u:hunter2@r?timeout=1s", `unknown option "timeout"`},
		{"redis://u:hunter2@r?protocol=4", "protocol"},
		{"redis://u:hunter2@r?protocol=2&protocol=3", "2 times"},
		{"redis://weir@r", "without a password"},
		{"redis://u:hunter2@", "no host"},
		{"redis://u:hun%zzter2@r", "invalid"},
		{"", "empty"},
	} {
		_, err := redisconn.ParseURL(tc.in)
		if err == nil {
			t.Errorf("ParseURL(%q) = nil error, want one", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseURL(%q) = %v, want it to say %q", tc.in, err, tc.want)
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "hun%zz") {
			t.Errorf("ParseURL(%q) error shows the password: %v", tc.in, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"rediss://weir:p@ss@r:6380/1": "rediss://weir:xxxxx@r:6380/1",
		"redis://:p@r":                "redis://:xxxxx@r",
		"redis://r:6379":              "redis://r:6379",
		"redis://weir@r":              "redis://weir@r",
		"r:6379":                      "r:6379",
		"redis://u:%zz@r":             "redis://u:xxxxx@r",
	} {
		if got := redisconn.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseSeeds(t *testing.T) {
	got, err := redisconn.ParseSeeds([]string{"a:7000", "rediss://weir:pw@b:7001", "rediss://weir:pw@c"})
	if err != nil {
		t.Fatal(err)
	}
	want := redisconn.Endpoint{Addrs: []string{"a:7000", "b:7001", "c:6379"}, Username: "weir", Password: "pw", TLS: true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseSeeds = %+v, want %+v", got, want)
	}
	for _, bad := range [][]string{
		nil,
		{"rediss://weir:pw@b", "redis://weir:pw@c"},
		{"redis://weir:pw@b", "redis://weir:other@c"},
		{"redis://b/1"},
		{"b:x"},
	} {
		_, err := redisconn.ParseSeeds(bad)
		if err == nil {
			t.Errorf("ParseSeeds(%q) = nil error", bad)
		} else if strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "other") {
			t.Errorf("ParseSeeds(%q) error shows a password: %v", bad, err)
		}
	}
}

func TestParseSentinel(t *testing.T) {
	m, addrs, err := redisconn.ParseSentinel("mymaster@s1:26380, s2 ,10.0.0.3:5000")
	if err != nil {
		t.Fatal(err)
	}
	if m != "mymaster" || !reflect.DeepEqual(addrs, []string{"s1:26380", "s2:26379", "10.0.0.3:5000"}) {
		t.Fatalf("got %q %q", m, addrs)
	}
	for _, bad := range []string{"", "s1:26379", "@s1:26379", "mymaster@", "mymaster@s1:x"} {
		if _, _, err := redisconn.ParseSentinel(bad); err == nil {
			t.Errorf("ParseSentinel(%q) = nil error", bad)
		}
	}
}

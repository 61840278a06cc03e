package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/region"
)

func TestParseConfig_regionFlags(t *testing.T) {
	c, err := parseConfig([]string{"--region", "eu", "--region-peers", "us=10.0.0.2:8091, ap=ap.example:8091",
		"--region-floor", "0.05", "--region-interval", "250ms"}, envMap("WEIR_REGION_TTL", "3s"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	lc, on, err := c.regions.linkConfig(c.Region, c.NodeName)
	if err != nil || !on {
		t.Fatalf("linkConfig: on %v, %v", on, err)
	}
	if lc.Region != "eu" || lc.Peers["us"] != "10.0.0.2:8091" || lc.Peers["ap"] != "ap.example:8091" ||
		lc.Shares.Floor != region.Whole/20 || lc.Shares.Interval != 250*time.Millisecond || lc.Shares.TTL != 3*time.Second ||
		strings.Join(lc.Shares.Regions, ",") != "ap,eu,us" {
		t.Fatalf("link config %+v", lc)
	}
	c, err = parseConfig(nil, envMap("WEIR_REGION", "eu", "WEIR_REGION_PEERS", "us=u:1"), io.Discard)
	if _, on, _ := c.regions.linkConfig(c.Region, c.NodeName); err != nil || !on {
		t.Fatalf("regions from the environment: on %v, %v", on, err)
	}
	if _, on, err := (regions{}).linkConfig("eu", "n"); on || err != nil {
		t.Fatalf("no peers: on %v, %v; want off, as today", on, err)
	}
}

func TestParseConfig_badRegionFlagsFailStartup(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--region-peers", "us=u:1"}, "needs --region"},
		{[]string{"--region", "eu", "--region-peers", "us"}, "want region=host:port"},
		{[]string{"--region", "eu", "--region-peers", "us=u:1,us=v:1"}, "twice"},
		{[]string{"--region", "eu", "--region-peers", "eu=u:1"}, "own region"},
		{[]string{"--region", "eu", "--region-peers", "us=u:1", "--region-floor", "0.6"}, "at most 1/2"},
		{[]string{"--region", "eu", "--region-peers", "us=u:1", "--region-floor", "-0.1"}, "--region-floor"},
		{[]string{"--region", "eu", "--region-peers", "us=u:1", "--region-ttl", "100ms"}, "ttl"},
		{[]string{"--region", "eu", "--region-peers", "us=u:1", "--region-interval", "0s"}, "interval"},
	} {
		_, err := parseConfig(tc.args, envMap(), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := parseConfig(nil, envMap("WEIR_REGION_FLOOR", "lots"), io.Discard); err == nil || !strings.Contains(err.Error(), "WEIR_REGION_FLOOR") {
		t.Errorf("bad WEIR_REGION_FLOOR: %v", err)
	}
}

// TestRegions_policyCheck_underTheRegionFlags: with three regions at the
// default floor, a strict global limit of burst 2 is refused with the
// flags and the limit named, a fast one passes with a warning; without
// regions nothing is checked.
func TestRegions_policyCheck_underTheRegionFlags(t *testing.T) {
	c, err := parseConfig([]string{"--region", "eu", "--region-peers", "us=u:1,ap=a:1"}, envMap(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	check := c.regions.policyCheck(c.Region, c.NodeName)
	parse := func(consistency string) *policy.Policy {
		p, err := policy.Parse("p.yaml", []byte("version: v1\nlimits:\n  - {name: glob, match: [tenant], rate: 100/s, burst: 2, scope: global, consistency: "+consistency+"}\n"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := check(parse("strict")); err == nil || !strings.Contains(err.Error(), "--region-peers (3 regions)") || !strings.Contains(err.Error(), `limit "glob"`) {
		t.Fatalf("strict burst 2 over 3 regions: %v; want a refusal naming the flags and the limit", err)
	}
	if w, err := check(parse("fast")); err != nil || len(w) != 1 {
		t.Fatalf("fast burst 2 over 3 regions: %q %v; want one warning", w, err)
	}
	if (regions{}).policyCheck("eu", "n") != nil {
		t.Fatal("no regions: a check, want none")
	}
}

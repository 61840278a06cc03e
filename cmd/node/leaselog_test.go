package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/peer"
)

// fakeOwner answers every lease refresh with its canned answers.
type fakeOwner struct {
	peer.Handler
	answers []peer.LeaseAnswer
}

func (f fakeOwner) HandleLease(context.Context, string, lease.Refresh) []peer.LeaseAnswer {
	return f.answers
}

func TestGrantLog_HandleLease_logsGrantsOnlyAtDebug(t *testing.T) {
	answers := []peer.LeaseAnswer{
		{Answer: lease.Answer{Outcome: lease.Granted, TAT: 7_000_000_000, Lease: 3, Units: 4, TTL: int64(250 * time.Millisecond)}},
		{Answer: lease.Answer{Outcome: lease.Denied, TAT: 9, RetryAfter: 5}},
		{NotOwner: "node-c"},
		{Err: context.DeadlineExceeded},
	}
	r := lease.Refresh{Items: []lease.Request{{Key: "weir:{t}:hot:t"}, {Key: "k2"}, {Key: "k3"}, {Key: "k4"}}}
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var buf bytes.Buffer
		g := grantLog{fakeOwner{answers: answers}, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))}
		got := g.HandleLease(context.Background(), "node-b#x", r)
		if len(got) != len(answers) || got[0].Units != 4 || got[2].NotOwner != "node-c" {
			t.Fatalf("answers changed: %+v", got)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if level == slog.LevelInfo {
			if buf.Len() != 0 {
				t.Fatalf("logged at info level: %s", buf.String())
			}
			continue
		}
		want := `msg="lease granted" key=weir:{t}:hot:t peer=node-b#x lease=3 units=4 tat=7000000000 ttl=250ms`
		if len(lines) != 1 || !strings.HasSuffix(lines[0], want) {
			t.Fatalf("log:\n%s\nwant one line ending %s", buf.String(), want)
		}
		if m := grantRE.FindStringSubmatch(lines[0]); m == nil || m[1] != "weir:{t}:hot:t" || m[2] != "4" || m[3] != "7000000000" {
			t.Fatalf("the process test's pattern reads %q from %s", m, lines[0])
		}
	}
}

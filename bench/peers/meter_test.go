package main

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseStatTicks(t *testing.T) {
	// Fields 14 and 15 (utime, stime) are 7 and 5; the command holds a
	// space and a ')' of its own.
	stat := "4242 (a b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 3 0 1000 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := parseStatTicks([]byte(stat))
	if err != nil || got != 12 {
		t.Errorf("parseStatTicks = %d, %v; want 7 + 5 = 12", got, err)
	}
	for _, bad := range []string{
		"",
		"4242 no parenthesis S 1 2 3",
		"4242 (short) S 1 2 3 4 5 6 7 8",
		"4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 seven 5 0 0 20 0 3 0",
		"4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 -5 0 0 20 0 3 0",
	} {
		if n, err := parseStatTicks([]byte(bad)); err == nil {
			t.Errorf("parseStatTicks(%q) = %d, want an error", bad, n)
		}
	}
}

func TestProcessTicks_countsThisProcessCPU(t *testing.T) {
	pid := os.Getpid()
	before, err := processTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has charged this process two more ticks: the
	// reading must follow CPU spent, not stay put.
	deadline := time.Now().Add(30 * time.Second)
	for x := 0; ; x++ {
		now, err := processTicks(pid)
		if err != nil {
			t.Fatal(err)
		}
		if now >= before+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticks still %d after spinning for 30 s (started at %d)", now, before)
		}
		for range 1_000_000 {
			x ^= x << 1
		}
	}
	if _, err := processTicks(1 << 30); err == nil {
		t.Error("processTicks of a pid that does not exist: want an error")
	}
}

func TestParseCommandstats(t *testing.T) {
	text := "# Commandstats\r\n" +
		"cmdstat_mget:calls=97,usec=1000,usec_per_call=10.31,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=12,usec=300,usec_per_call=25.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setname:calls=3,usec=3,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:usec=5,calls=4,usec_per_call=1.25\r\n" +
		"\r\n"
	got, err := parseCommandstats(text)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"mget": 97, "client|setname": 3, "evalsha": 4}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v (info left out)", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d calls, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if total(got) != 104 {
		t.Errorf("total %d, want 104", total(got))
	}
	for _, bad := range []string{
		"cmdstat_get:usec=1",
		"cmdstat_get:calls=x,usec=1",
		"cmdstat_get:calls=-1",
		"cmdstat_:calls=1",
		"cmdstat_get",
	} {
		if m, err := parseCommandstats(bad); err == nil {
			t.Errorf("parseCommandstats(%q) = %v, want an error", bad, m)
		}
	}
}

func TestDiffCounts_andTopCounts(t *testing.T) {
	from := map[string]int64{"mget": 10, "ping": 2}
	to := map[string]int64{"mget": 25, "ping": 2, "evalsha": 15, "time": 1}
	d := diffCounts(from, to)
	if len(d) != 3 || d["mget"] != 15 || d["evalsha"] != 15 || d["time"] != 1 {
		t.Errorf("diffCounts = %v, want mget 15, evalsha 15, time 1", d)
	}
	if got := topCounts(d, 2); got != "evalsha 15, mget 15" {
		t.Errorf("topCounts = %q, want the two largest, ties by name", got)
	}
	if got := topCounts(nil, 3); got != "" {
		t.Errorf("topCounts(nil) = %q", got)
	}
}

// send writes inline commands to a Redis and reads one reply line each.
func send(t *testing.T, addr string, cmds ...string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	for _, c := range cmds {
		if _, err := conn.Write([]byte(c + "\r\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMeter_usageOverTheWindow(t *testing.T) {
	ps := &procs{dir: t.TempDir()}
	t.Cleanup(ps.stopAll)
	addr, err := startRedis(context.Background(), ps, "redis")
	if err != nil {
		t.Fatal(err)
	}
	send(t, addr, "SET a 1") // before the window: not counted
	m := &meter{pids: append(ps.pids(), os.Getpid()), redis: addr}
	m.begin()
	send(t, addr, "SET a 2", "GET a", "GET a", "INCR n")
	m.end()
	u, err := m.usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.cmds["set"] != 1 || u.cmds["get"] != 2 || u.cmds["incr"] != 1 || total(u.cmds) != 4 {
		t.Errorf("commands %v, want set 1, get 2, incr 1 and no info", u.cmds)
	}
	if u.cpu < 0 {
		t.Errorf("cpu %v", u.cpu)
	}

	unbegun := &meter{pids: ps.pids()}
	unbegun.end()
	if _, err := unbegun.usage(); err == nil {
		t.Error("usage of a meter whose window never began: want an error")
	}
	gone := &meter{pids: []int{1 << 30}}
	gone.begin()
	if _, err := gone.usage(); err == nil || !strings.Contains(err.Error(), "cpu") {
		t.Errorf("usage with a vanished process: %v, want its error", err)
	}
	noRedis := &meter{pids: ps.pids(), redis: "127.0.0.1:1"}
	noRedis.begin()
	if _, err := noRedis.usage(); err == nil {
		t.Error("usage with an unreachable Redis: want an error")
	}
}

func TestReadBulk_rejectsOtherReplies(t *testing.T) {
	for _, reply := range []string{"-ERR unknown\r\n", "$-1\r\n", "$99999999\r\n", "$5\r\nab"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 64)
			_, _ = c.Read(buf)
			_, _ = c.Write([]byte(reply))
		}()
		_, err = redisCommandstats(l.Addr().String())
		l.Close()
		if err == nil {
			t.Errorf("reply %q: want an error", reply)
		}
	}
	if _, err := redisCommandstats("127.0.0.1:1"); err == nil || errors.Is(err, nil) {
		t.Error("no Redis listening: want an error")
	}
}

package main

import (
	"context"
	"testing"
)

func TestStartRedis_stopAllEndsIt(t *testing.T) {
	ps := &procs{dir: t.TempDir()}
	t.Cleanup(ps.stopAll)
	addr, err := startRedis(context.Background(), ps, "redis")
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(addr); err != nil {
		t.Fatalf("started redis does not answer: %v", err)
	}
	p := ps.list[0]
	ps.stopAll()
	select {
	case <-p.exited:
	default:
		t.Fatal("stopAll returned before the process exited")
	}
	if len(ps.list) != 0 {
		t.Errorf("%d processes still listed after stopAll", len(ps.list))
	}
	if err := ping(addr); err == nil {
		t.Error("redis still answers after stopAll")
	}
}

func TestFreeAddrsOn_distinct(t *testing.T) {
	addrs, err := freeAddrsOn("127.0.0.2", 5)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for _, a := range addrs {
		if seen[a] {
			t.Errorf("address %s handed out twice: %v", a, addrs)
		}
		seen[a] = true
	}
}

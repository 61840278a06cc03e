package main

import (
	"context"
	"net"
	"strings"
	"testing"
)

func startEcho(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveEcho(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return lis.Addr().String()
}

func TestEcho_benchDrivesIt(t *testing.T) {
	addr := startEcho(t)
	for _, batch := range []string{"1", "5"} {
		code, s := runBenchJSON(t, t.Context(), "--addr", addr, "--duration", "200ms", "--workers", "2", "--batch", batch)
		if code != exitOK || s.Decisions == 0 || s.Allowed != s.Decisions || len(s.Errors) != 0 {
			t.Fatalf("batch %s: exit %d, %+v", batch, code, s)
		}
	}
}

func TestRunEcho_badAddress(t *testing.T) {
	code, _, stderr := runCLI(t.Context(), "echo", "--addr", "not-an-address")
	if code != exitError || !strings.Contains(stderr, "weir echo:") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

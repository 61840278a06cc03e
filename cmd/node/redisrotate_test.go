package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// TestNode_process_redisPasswordRotatedOnSIGHUP runs the node as its own
// process with the Redis user and password file from the environment,
// rotates the password on the server (the old one removed, connections
// killed) and checks that the node falls back until SIGHUP makes it
// re-read the file, and then decides in Redis again.
func TestNode_process_redisPasswordRotatedOnSIGHUP(t *testing.T) {
	const oldPW, newPW = "rot-old-Secret1", "rot-new-Secret2"
	srv := redistest.Start(t, redistest.WithACL(append(aclServerUsers, docACL(t, oldPW))...))
	admin := redisAdmin(t, srv.Addr())
	pwFile := writeSecret(t, "redis-password", oldPW)
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(connPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "WEIR_TEST_RUN_NODE=1", "WEIR_GRPC_ADDR=127.0.0.1:0", "WEIR_HTTP_ADDR=127.0.0.1:0",
		"WEIR_PEER_ADDR=127.0.0.1:0", "WEIR_ADMIN_ADDR=127.0.0.1:0", "WEIR_POLICY="+policy,
		"WEIR_REDIS_ADDR="+srv.Addr(), "WEIR_REDIS_USERNAME=weir", "WEIR_REDIS_PASSWORD_FILE="+pwFile)
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	var grpcAddr string
	waitFor(t, 20*time.Second, func() bool {
		if m := listeningRE.FindStringSubmatch(out.String()); m != nil {
			grpcAddr = m[1]
		}
		return grpcAddr != ""
	})
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := weirv1.NewRateLimiterClient(conn)
	inRedis := func() bool { return decide(t, c, 1, "tenant", "t1", "api", "x").Fallback == nil }
	waitFor(t, 10*time.Second, inRedis)

	// The server now takes only the new password, and drops weir's
	// connections: the node reconnects with the old one and is refused.
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "weir", ">"+newPW, "<"+oldPW).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "KILL", "USER", "weir").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return !inRedis() })

	if err := os.WriteFile(pwFile, []byte(newPW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(out.String(), "redis password reloaded") })
	waitFor(t, 20*time.Second, inRedis)
	for _, pw := range []string{oldPW, newPW} {
		if strings.Contains(out.String(), pw) {
			t.Fatalf("a password is in the log:\n%s", out)
		}
	}
}

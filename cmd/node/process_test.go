package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// TestMain lets the test binary act as the node itself (the standard
// re-exec pattern), so the process test runs real main() without a build.
func TestMain(m *testing.M) {
	if os.Getenv("WEIR_TEST_RUN_NODE") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

var listeningRE = regexp.MustCompile(`msg="weir node listening" grpc=(\S+) http=(\S+)`)

// TestNode_process_defaultsServeAndStopOnSIGTERM runs the node as its own
// process with no flags (addresses from the environment, as the README
// shows), decides over gRPC, and stops it with SIGTERM.
func TestNode_process_defaultsServeAndStopOnSIGTERM(t *testing.T) {
	out := &syncBuffer{}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "WEIR_TEST_RUN_NODE=1", "WEIR_GRPC_ADDR=127.0.0.1:0", "WEIR_HTTP_ADDR=127.0.0.1:0", "WEIR_PEER_ADDR=127.0.0.1:0", "WEIR_ADMIN_ADDR=127.0.0.1:0")
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	})

	var grpcAddr string
	deadline := time.Now().Add(20 * time.Second)
	for grpcAddr == "" {
		if m := listeningRE.FindStringSubmatch(out.String()); m != nil {
			grpcAddr = m[1]
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("node exited early: %v\n%s", err, out)
		case <-time.After(20 * time.Millisecond): // polling the log, not waiting for an outcome
		}
		if time.Now().After(deadline) {
			t.Fatalf("node never logged its addresses:\n%s", out)
		}
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := weirv1.NewRateLimiterClient(conn).Decide(ctx, &weirv1.DecideRequest{Descriptors: map[string]string{"tenant": "demo", "user": "u7"}})
	if err != nil || !r.Allowed || r.Remaining != 2 {
		t.Fatalf("decide: %+v %v", r, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, out)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("node did not stop on SIGTERM:\n%s", out)
	}
}

package redisbackend_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// TestClassify_realServerErrors gets each failure class from a real
// redis-server through the Backend (so through its wrapping) and checks
// Classify names it.
func TestClassify_realServerErrors(t *testing.T) {
	ctx := t.Context()
	master, replica := redistest.Start(t), redistest.Start(t)
	host, port, _ := strings.Cut(master.Addr(), ":")
	if err := replica.Client().ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	dec := func(be *redisbackend.Backend) error {
		_, err := be.Decide(ctx, failKeys, failLimits, 1, 0)
		return err
	}
	cases := []struct {
		name string
		err  func(t *testing.T) error
		want string
	}{
		{"nil", func(*testing.T) error { return nil }, redisbackend.ClassNone},
		{"readonly replica", func(t *testing.T) error { return dec(newBackend(t, replica.Client(), time.Second)) }, redisbackend.ClassReadOnly},
		{"script error", func(t *testing.T) error {
			if err := master.Client().Set(ctx, failKeys[0], "not a tat", 0).Err(); err != nil {
				t.Fatal(err)
			}
			defer master.Client().Del(ctx, failKeys[0])
			return dec(newBackend(t, master.Client(), time.Second))
		}, redisbackend.ClassOther},
		{"paused", func(t *testing.T) error {
			be := newBackend(t, master.Client(), 50*time.Millisecond)
			master.Pause()
			defer master.Resume()
			return dec(be)
		}, redisbackend.ClassTimeout},
		// go-redis retries a refused dial until the deadline and then
		// reports only the deadline: a stopped server reads as a timeout
		// (and costs each call its whole timeout).
		{"stopped", func(t *testing.T) error {
			srv := redistest.Start(t)
			be := newBackend(t, srv.Client(), 50*time.Millisecond)
			srv.Stop()
			return dec(be)
		}, redisbackend.ClassTimeout},
		{"moved", func(t *testing.T) error {
			cl := redistest.StartCluster(t, 3)
			slot := int(redisbackend.KeySlot(failKeys[0]))
			for i := range 3 {
				n := cl.Node(i)
				if cl.MasterOfSlot(slot) != n {
					return dec(newBackend(t, n.Client(), time.Second)) // a plain client follows no redirect
				}
			}
			t.Fatal("every node serves the slot")
			return nil
		}, redisbackend.ClassRedirect},
		{"deadline", func(*testing.T) error { return fmt.Errorf("x: %w", context.DeadlineExceeded) }, redisbackend.ClassTimeout},
		{"closed client", func(*testing.T) error { return fmt.Errorf("x: %w", redis.ErrClosed) }, redisbackend.ClassUnreachable},
		{"other", func(*testing.T) error { return errors.New("boom") }, redisbackend.ClassOther},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err(t)
			if got := redisbackend.Classify(err); got != tc.want {
				t.Fatalf("Classify(%v) = %q, want %q (%#v)", err, got, tc.want, err)
			}
		})
	}
}

package main

import (
	"errors"
	"testing"

	"github.com/weirhq/weir/policy"
)

// The check a node hands its policy watcher passes the inner check's verdict
// through, and works before the owner exists and without an inner check.
func TestNode_restartOwnership_passesTheCheckThrough(t *testing.T) {
	n := &node{}
	p := policy.Builtin()
	if w, err := n.restartOwnership(nil)(p); err != nil || w != nil {
		t.Fatalf("no inner check: %v, %v", w, err)
	}
	refuse := errors.New("refused")
	inner := func(*policy.Policy) ([]string, error) { return []string{"warned"}, refuse }
	w, err := n.restartOwnership(inner)(p)
	if !errors.Is(err, refuse) || len(w) != 1 || w[0] != "warned" {
		t.Fatalf("inner check's verdict: %v, %v", w, err)
	}
}

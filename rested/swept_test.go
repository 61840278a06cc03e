package rested

import "testing"

func TestSweptSet_epochAndCap(t *testing.T) {
	s := newSweptSet(2)
	s.add(1, "a")
	if !s.has(1, "a") || s.has(2, "a") || s.has(1, "b") {
		t.Fatal("a key swept at epoch 1 is known at 1 only")
	}
	s.add(0, "b") // a sweep that raced a drop
	if s.has(0, "b") || s.has(1, "b") {
		t.Fatal("a sweep of an older epoch was recorded")
	}
	s.add(2, "c")
	if s.has(2, "a") || !s.has(2, "c") {
		t.Fatal("a newer epoch did not start over")
	}
	s.add(2, "d")
	s.add(2, "e") // full: starts over
	if s.len() != 1 || !s.has(2, "e") || s.has(2, "c") {
		t.Fatalf("over the cap: %d held", s.len())
	}
}

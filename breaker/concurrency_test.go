package breaker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	goroutines = 64
	callsEach  = 300
)

// checkChain fails unless the recorded transitions form one unbroken chain
// from closed that ends in b's current state.
func checkChain(t *testing.T, b *Breaker, rec *recorder) {
	t.Helper()
	state := b.State() // first: it may itself move open to half-open
	prev := "closed"
	for i, tr := range rec.transitions() {
		_, fromTo, _ := strings.Cut(tr, ":")
		from, to, _ := strings.Cut(fromTo, "->")
		if from != prev || from == to {
			t.Fatalf("transition %d %q does not follow %q", i, tr, prev)
		}
		prev = to
	}
	if got := state.String(); got != prev {
		t.Fatalf("State() = %s, last transition to %s", got, prev)
	}
}

func TestBreaker_concurrentFailures_openOnce(t *testing.T) {
	rec := &recorder{}
	b := newBreaker(t, cfg(10, time.Hour, 1), rec.onChange)
	var admitted, rejected atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range callsEach {
				done, err := b.Allow()
				if errors.Is(err, ErrOpen) {
					rejected.Add(1)
					continue
				}
				admitted.Add(1)
				done(errDep)
				done(errDep) // duplicates never count
			}
		})
	}
	wg.Wait()
	if got, want := rec.transitions(), []string{"r:closed->open"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
	if total := admitted.Load() + rejected.Load(); total != goroutines*callsEach {
		t.Errorf("admitted+rejected = %d, want %d", total, goroutines*callsEach)
	}
	if admitted.Load() < 10 {
		t.Errorf("admitted %d calls, want at least the threshold", admitted.Load())
	}
	wantState(t, b, Open)
}

func TestBreaker_concurrentProbes_exactlyHalfOpenProbes(t *testing.T) {
	for _, probes := range []int{1, 3, 8} {
		t.Run(fmt.Sprint(probes), func(t *testing.T) {
			rec := &recorder{}
			b := newBreaker(t, cfg(1, shortOpen, probes), rec.onChange)
			trip(t, b, 1)
			waitHalfOpen(t, b)
			var tried sync.WaitGroup
			tried.Add(goroutines)
			allTried := make(chan struct{})
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					done, err := b.Allow()
					tried.Done()
					if err != nil {
						return
					}
					admitted.Add(1)
					<-allTried // hold the slot until everyone has asked
					done(nil)
				})
			}
			tried.Wait()
			close(allTried)
			wg.Wait()
			if got := admitted.Load(); got != int64(probes) {
				t.Errorf("admitted %d probes, want %d", got, probes)
			}
			wantState(t, b, Closed)
			checkChain(t, b, rec)
		})
	}
}

// Random outcomes (some excused) from many goroutines while open periods
// pass: every call is either admitted or rejected, and the transitions form
// one consistent chain ending in the current state.
func TestBreaker_concurrentMixed_consistent(t *testing.T) {
	rec := &recorder{}
	c := cfg(3, 50*time.Microsecond, 2)
	c.MinRequests = 10
	b := newBreaker(t, c, rec.onChange)
	var admitted, rejected atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range callsEach {
				done, err := b.Allow()
				if err != nil {
					rejected.Add(1)
					continue
				}
				admitted.Add(1)
				var outcome error
				switch rng.IntN(6) {
				case 0, 1:
					outcome = errDep
				case 2:
					outcome = ErrExcused
				}
				done(outcome)
				if rng.IntN(4) == 0 {
					done(errDep)
				}
			}
		})
	}
	wg.Wait()
	if total := admitted.Load() + rejected.Load(); total != goroutines*callsEach {
		t.Errorf("admitted+rejected = %d, want %d", total, goroutines*callsEach)
	}
	if len(rec.transitions()) == 0 {
		t.Error("no transitions: the test exercised only the closed state")
	}
	checkChain(t, b, rec)
}

package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// Op names a method of [Memory], for its faults and call counts.
type Op string

const (
	// AnyOp matches every method: a fault set for it hits whichever
	// method is called next, and Calls(AnyOp) is the total.
	AnyOp Op = ""
	// OpLoad is LoadTATs.
	OpLoad Op = "load_tats"
	// OpStore is StoreTATs.
	OpStore Op = "store_tats"
	// OpDecide is DecidePipelined.
	OpDecide Op = "decide_pipelined"
	// OpLoadSets is LoadSets.
	OpLoadSets Op = "load_sets"
	// OpStoreSets is StoreSets.
	OpStoreSets Op = "store_sets"
)

// fault is one FailNext or FailNextApplied: left more calls of op fail
// with err, after taking effect when applied.
type fault struct {
	op      Op
	left    int
	err     error
	applied bool
}

// gate holds the calls of op that arrive while it is open (see Block).
type gate struct {
	op       Op
	released chan struct{}
}

func (o Op) matches(op Op) bool { return o == AnyOp || o == op }

// Refused returns an error like the one a dial to a Redis that is down
// gives (ECONNREFUSED): redisbackend.Classify names it "unreachable". For
// a timeout, inject context.DeadlineExceeded ("timeout"), which is what a
// Backend's call that ran out of time returns.
func Refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// FailNext makes the next n calls of op (AnyOp: of any method) fail with
// err, wrapped as the Backend wraps its errors, without taking effect.
// Faults set earlier are used up first.
func (m *Memory) FailNext(op Op, n int, err error) { m.addFault(op, n, err, false) }

// FailNextApplied is FailNext for calls that take effect and then fail: a
// reply lost on its way back, or a deadline that passed after Redis ran
// the command. Their caller must treat the outcome as unknown.
func (m *Memory) FailNextApplied(op Op, n int, err error) { m.addFault(op, n, err, true) }

func (m *Memory) addFault(op Op, n int, err error, applied bool) {
	if n <= 0 || err == nil {
		panic(fmt.Sprintf("redistest: fault needs n > 0 and an error, got %d and %v", n, err))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.faults = append(m.mu.faults, &fault{op: op, left: n, err: err, applied: applied})
}

// Delay makes every later call of op (AnyOp: of every method) wait d of
// real time before it runs; a call waits its method's delay plus AnyOp's.
// A call whose context ends first fails with the context's error, having
// taken no effect. d == 0 removes the delay. The wait is on real time, not
// the twin's clock, because the deadlines it races are contexts'.
func (m *Memory) Delay(op Op, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.delays[op] = d
}

// Block holds every call of op (AnyOp: of every method) that arrives from
// now on until release is called; one whose context ends first fails with
// the context's error, having taken no effect. release may be called more
// than once. See [Memory.WaitBlocked] to know the calls have arrived.
func (m *Memory) Block(op Op) (release func()) {
	g := &gate{op: op, released: make(chan struct{})}
	m.mu.Lock()
	m.mu.gates = append(m.mu.gates, g)
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for i, o := range m.mu.gates {
			if o == g {
				m.mu.gates = append(m.mu.gates[:i:i], m.mu.gates[i+1:]...)
				close(g.released)
				return
			}
		}
	}
}

// WaitBlocked waits until at least n calls of op (AnyOp: of any method)
// are held by Block, or ctx ends (its error is returned).
func (m *Memory) WaitBlocked(ctx context.Context, op Op, n int) error {
	for {
		m.mu.Lock()
		held := m.mu.waiting[op]
		if op == AnyOp {
			held = 0
			for _, c := range m.mu.waiting {
				held += c
			}
		}
		changed := m.mu.changed
		m.mu.Unlock()
		if held >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("redistest: %d of %d %q calls blocked: %w", held, n, op, ctx.Err())
		}
	}
}

// Calls returns how many times op (AnyOp: any method) was called,
// whatever the outcome.
func (m *Memory) Calls(op Op) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if op != AnyOp {
		return m.mu.calls[op]
	}
	total := 0
	for _, c := range m.mu.calls {
		total += c
	}
	return total
}

func (m *Memory) count(op Op) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.calls[op]++
}

// do runs one call of op that reaches "Redis": it waits at the gates and
// delays in force, fails with the context's error if that ended, takes
// the next fault of op, and otherwise (or for an applied fault) runs apply
// under the lock at the twin's clock (Unix nanoseconds). The error is
// unwrapped; the method wraps it as the Backend does.
func do[T any](ctx context.Context, m *Memory, op Op, apply func(now int64) T) (T, error) {
	var zero T
	if err := m.hold(ctx, op); err != nil {
		return zero, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	f := m.takeFaultLocked(op)
	if f != nil && !f.applied {
		return zero, f.err
	}
	v := apply(m.clk.Now().UnixNano())
	if f != nil {
		return zero, f.err
	}
	return v, nil
}

func (m *Memory) takeFaultLocked(op Op) *fault {
	for i, f := range m.mu.faults {
		if f.op.matches(op) {
			if f.left--; f.left == 0 {
				m.mu.faults = append(m.mu.faults[:i:i], m.mu.faults[i+1:]...)
			}
			return f
		}
	}
	return nil
}

// hold waits at every open gate of op, then for op's delays.
func (m *Memory) hold(ctx context.Context, op Op) error {
	m.mu.Lock()
	var gates []*gate
	for _, g := range m.mu.gates {
		if g.op.matches(op) {
			gates = append(gates, g)
		}
	}
	delay := m.mu.delays[op]
	if op != AnyOp {
		delay += m.mu.delays[AnyOp]
	}
	m.mu.Unlock()
	for _, g := range gates {
		if err := m.atGate(ctx, op, g); err != nil {
			return err
		}
	}
	if delay <= 0 {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// atGate waits for g's release or ctx's end, counted in waiting meanwhile.
func (m *Memory) atGate(ctx context.Context, op Op, g *gate) error {
	m.noteWaiting(op, 1)
	defer m.noteWaiting(op, -1)
	select {
	case <-g.released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Memory) noteWaiting(op Op, d int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.waiting[op] += d
	close(m.mu.changed)
	m.mu.changed = make(chan struct{})
}

package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"sync"
	"time"
)

// Outcome is what a client saw of one operation.
type Outcome string

const (
	// Allowed: the node answered and admitted the request.
	Allowed Outcome = "allowed"
	// Denied: the node answered and refused it.
	Denied Outcome = "denied"
	// Error: the node answered with an error instead of a decision, or the
	// call failed before its deadline (connection refused, reset).
	Error Outcome = "error"
	// Timeout: no answer within the call's deadline. The request may or may
	// not have been decided; it was not admitted as far as the caller knows.
	Timeout Outcome = "timeout"
)

// Valid reports whether o is one of the four outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case Allowed, Denied, Error, Timeout:
		return true
	}
	return false
}

// Answered reports whether the node gave a decision in time.
func (o Outcome) Answered() bool { return o == Allowed || o == Denied }

// LimitKey names one enforced limit a request matched and the key it was
// decided under.
type LimitKey struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	// Denied is this limit's own verdict: it alone would have refused the
	// request. A composite is denied when any of its limits is.
	Denied bool `json:"denied,omitempty"`
}

// Op is one client operation.
type Op struct {
	ID     int64  `json:"id"`
	Worker int    `json:"worker"`
	Node   string `json:"node"`  // the node the call was sent to
	Class  string `json:"class"` // the workload's name for the kind of request
	// Invoke and Complete bound the moment the decision was made.
	Invoke   int64 `json:"invoke"`
	Complete int64 `json:"complete"`
	// Limits are the enforced (non-shadow) limits the request matched. On an
	// error or timeout they are the ones the workload expected.
	Limits  []LimitKey `json:"limits"`
	Cost    int64      `json:"cost"`
	Outcome Outcome    `json:"outcome"`
	// FallbackMode and FallbackReason are set when a failure policy made the
	// decision (open, closed or local; owner_unreachable, redis_unavailable…).
	FallbackMode   string        `json:"fallback_mode,omitempty"`
	FallbackReason string        `json:"fallback_reason,omitempty"`
	RetryAfter     time.Duration `json:"retry_after,omitempty"`
	Err            string        `json:"err,omitempty"`
	// Permit is, for a call of a concurrency class, what became of the
	// permit it asked for: whether one came back, and when the caller
	// renewed and released it (or "crashed", never releasing it).
	Permit *PermitLife `json:"permit,omitempty"`
}

// PermitLife is one permit's life as its caller saw it. Times are Unix
// nanoseconds; zero means the step never happened.
type PermitLife struct {
	// Granted: the admitted decision returned a permit.
	Granted bool `json:"granted,omitempty"`
	// Crashed: the caller dropped the permit without releasing it (a
	// crashed caller); its slots come back only when its TTL passes.
	Crashed bool `json:"crashed,omitempty"`
	// RenewInvoke and RenewComplete bound a Renew call; Renewed is its
	// answer (renewed: true).
	RenewInvoke   int64 `json:"renew_invoke,omitempty"`
	RenewComplete int64 `json:"renew_complete,omitempty"`
	Renewed       bool  `json:"renewed,omitempty"`
	// ReleaseInvoke and ReleaseComplete bound the Release call; Released
	// is its answer (released: true).
	ReleaseInvoke   int64 `json:"release_invoke,omitempty"`
	ReleaseComplete int64 `json:"release_complete,omitempty"`
	Released        bool  `json:"released,omitempty"`
}

// Latency is how long the caller waited.
func (o Op) Latency() time.Duration { return time.Duration(o.Complete - o.Invoke) }

// Fallback reports whether a failure policy made the decision.
func (o Op) Fallback() bool { return o.FallbackMode != "" }

// EventKind says what a nemesis event is.
type EventKind string

const (
	// FaultStart: a fault begins. Its Fault names it, Nodes are the hosts it
	// touches.
	FaultStart EventKind = "fault-start"
	// FaultEnd: the fault with the same ID is healed.
	FaultEnd EventKind = "fault-end"
	// Info: anything else worth having in the record (a node restarted and
	// rejoined, the workload started or stopped).
	Info EventKind = "info"
	// Members: the one node in Nodes counted Members cluster members from
	// this time on (recorded when its count changes). The per-node share a
	// default failure policy falls back to is derived from it.
	Members EventKind = "members"
	// NodeLeft: the node in Nodes was taken out of the cluster on purpose
	// (a graceful leave), and NodeJoined: it was started again. Calls sent
	// to a node between the two are those a load balancer would have sent
	// elsewhere: the checker leaves them out of availability.
	NodeLeft   EventKind = "node-left"
	NodeJoined EventKind = "node-joined"
	// Leases: the nodes' lease counters at the end of the run, per limit
	// (Event.Leases), summed over every node and every process a node ran
	// (a restarted node starts its counters again at zero). Detail says
	// how they were read.
	Leases EventKind = "leases"
)

// Event is one thing the nemesis (or the runner) did.
type Event struct {
	Time   int64     `json:"time"`
	Kind   EventKind `json:"kind"`
	ID     int       `json:"id,omitempty"` // pairs a FaultStart with its FaultEnd
	Fault  string    `json:"fault,omitempty"`
	Nodes  []string  `json:"nodes,omitempty"`
	Detail string    `json:"detail,omitempty"`
	// Owners is, for a FaultStart, how many nodes may decide one fast key
	// at once while the fault lasts and until the cluster has recovered:
	// 1 when ownership stays unique, 2 when the documented split-ownership
	// term applies (a partition where both sides keep Redis, a node that
	// rejoins while the others still decide its keys). 0 means 1.
	Owners int `json:"owners,omitempty"`
	// Crash marks a FaultStart that loses an owner's memory (SIGKILL): the
	// checker applies the crash-loss term and the state-survival check.
	Crash bool `json:"crash,omitempty"`
	// Stale marks a FaultStart after which the touched nodes come back
	// with memory that may be out of date (a frozen process): the checker
	// applies the state-survival check when the fault ends.
	Stale bool `json:"stale,omitempty"`
	// Starved marks a FaultStart that leaves the touched nodes too little
	// CPU to answer their own callers in time (a node throttled to a few
	// percent of a CPU): the checker reports the calls sent to them while
	// the fault lasts apart from availability, as a load balancer's
	// outlier detection would have sent them elsewhere. Calls to every
	// other node are judged as usual.
	Starved bool `json:"starved,omitempty"`
	// Members is, for a Members event, how many members the node counted.
	Members int `json:"members,omitempty"`
	// Leases is, for a Leases event, the lease counters per limit name.
	Leases map[string]LeaseCounts `json:"leases,omitempty"`
}

// LeaseCounts are one limit's lease counters (the node's
// weir_lease_units_total and weir_lease_decisions_total), in units unless
// named decisions. Owners count what they granted, credited back (returned
// unspent) and wrote off when a lease expired unsettled (Expired: an upper
// bound on stranded units, as the owner cannot know how many of them were
// spent). Peers count what they received, spent, returned, left unspent
// at expiry (Stranded) and returned in a refresh that failed (Lost: they
// strand at the owner instead), and their decisions of the limit: admitted
// from leases, refused from the owner's last denial, forwarded.
type LeaseCounts struct {
	Granted  int64 `json:"granted,omitempty"`
	Credited int64 `json:"credited,omitempty"`
	Expired  int64 `json:"expired,omitempty"`
	Received int64 `json:"received,omitempty"`
	Spent    int64 `json:"spent,omitempty"`
	Returned int64 `json:"returned,omitempty"`
	Stranded int64 `json:"stranded,omitempty"`
	Lost     int64 `json:"lost,omitempty"`
	// Decisions at peers.
	SpentDecisions     int64 `json:"spent_decisions,omitempty"`
	RefusedDecisions   int64 `json:"refused_decisions,omitempty"`
	ForwardedDecisions int64 `json:"forwarded_decisions,omitempty"`
}

// Add returns the sum of c and o.
func (c LeaseCounts) Add(o LeaseCounts) LeaseCounts {
	return LeaseCounts{
		Granted: c.Granted + o.Granted, Credited: c.Credited + o.Credited, Expired: c.Expired + o.Expired,
		Received: c.Received + o.Received, Spent: c.Spent + o.Spent, Returned: c.Returned + o.Returned,
		Stranded: c.Stranded + o.Stranded, Lost: c.Lost + o.Lost,
		SpentDecisions: c.SpentDecisions + o.SpentDecisions, RefusedDecisions: c.RefusedDecisions + o.RefusedDecisions,
		ForwardedDecisions: c.ForwardedDecisions + o.ForwardedDecisions,
	}
}

// Held is the units peers held unspent at the reading: received, less
// spent, returned and stranded. Summed over processes it includes what a
// process held at its last reading before it was killed.
func (c LeaseCounts) Held() int64 { return c.Received - c.Spent - c.Returned - c.Stranded }

// LimitSpec is one limit of the policy a run enforced, in the terms the
// checker needs: within any window W a key admits at most Burst + W/Interval
// units.
type LimitSpec struct {
	Name        string        `json:"name"`
	Interval    time.Duration `json:"interval"` // T: one unit per Interval
	Burst       int64         `json:"burst"`    // B
	Consistency string        `json:"consistency"`
	OnFailure   string        `json:"on_failure"`
	// FallbackInterval and FallbackBurst are the per-node local fallback
	// limit (on_failure: local).
	FallbackInterval time.Duration `json:"fallback_interval,omitempty"`
	FallbackBurst    int64         `json:"fallback_burst,omitempty"`
	// FallbackShare marks a local fallback whose rate and burst are the
	// limit's share per member (the default failure policy): a node that
	// counts N members falls back to ceil(rate/N) per RatePer and a burst of
	// ceil(B/N). FallbackInterval and FallbackBurst are then unused.
	FallbackShare bool `json:"fallback_share,omitempty"`
	// Default marks a limit whose policy does not write on_failure, so it
	// gets the documented default (OnFailure and FallbackShare say what
	// that is).
	Default bool `json:"default,omitempty"`
	// RatePer is the unit the policy wrote the rate in (1s for "100/s", 1m
	// for "5/m"); the share is rounded up in it. Zero means 1s.
	RatePer time.Duration `json:"rate_per,omitempty"`
	// LeaseMax and LeaseTTL are the limit's lease terms (`lease: {max,
	// ttl}`), zero when it is not leasable. They are reported only: a
	// leasable limit is held to the same bound as any other, as leases add
	// no term.
	LeaseMax int64         `json:"lease_max,omitempty"`
	LeaseTTL time.Duration `json:"lease_ttl,omitempty"`
	// MaxInFlight and PermitTTL are set for a concurrency limit (kind:
	// concurrency): at most MaxInFlight units of permits live at once,
	// each for PermitTTL unless renewed or released. Interval and Burst
	// are then unused: the checker judges the permits held at every
	// instant instead of windows of admissions.
	MaxInFlight int64         `json:"max_in_flight,omitempty"`
	PermitTTL   time.Duration `json:"permit_ttl,omitempty"`
}

// Concurrency reports whether l is a concurrency limit's.
func (l LimitSpec) Concurrency() bool { return l.MaxInFlight > 0 }

// Bound is B + W/T: the most a key of this limit may admit within w.
func (l LimitSpec) Bound(w time.Duration) float64 {
	return float64(l.Burst) + float64(w)/float64(l.Interval)
}

// FallbackBound is the same bound for one node's local fallback limit; for
// a FallbackShare limit, that of a node counting one member (the whole
// limit). FallbackBoundFor gives it for a node counting n members.
func (l LimitSpec) FallbackBound(w time.Duration) float64 { return l.FallbackBoundFor(w, 1) }

// FallbackBoundFor is the bound of the local fallback limit of a node that
// counts members members.
func (l LimitSpec) FallbackBoundFor(w time.Duration, members int) float64 {
	if !l.FallbackShare {
		if l.FallbackInterval <= 0 {
			return 0
		}
		return float64(l.FallbackBurst) + float64(w)/float64(l.FallbackInterval)
	}
	count, per, burst := l.share(members)
	if count == 0 {
		return 0
	}
	return float64(burst) + float64(w)*float64(count)/float64(per)
}

// FallbackParams returns the emission interval and burst a node counting
// members members falls back to: the explicit fallback limit, or for a
// FallbackShare limit ceil(rate/N) per RatePer and ceil(B/N) (N at least 1).
func (l LimitSpec) FallbackParams(members int) (interval time.Duration, burst int64) {
	if !l.FallbackShare {
		return l.FallbackInterval, l.FallbackBurst
	}
	count, per, burst := l.share(members)
	if count == 0 {
		return 0, 0
	}
	return per / time.Duration(count), burst
}

// share is a FallbackShare limit's per-member share: count units per per,
// and the burst.
func (l LimitSpec) share(members int) (count int64, per time.Duration, burst int64) {
	if l.Interval <= 0 {
		return 0, 0, 0
	}
	n := int64(max(members, 1))
	per = l.RatePer
	if per <= 0 {
		per = time.Second
	}
	total := max(int64(math.Round(float64(per)/float64(l.Interval))), 1)
	return (total + n - 1) / n, per, (l.Burst + n - 1) / n
}

// Header describes a run.
type Header struct {
	Scenario string        `json:"scenario"`
	Nodes    []string      `json:"nodes"`
	Limits   []LimitSpec   `json:"limits"`
	Deadline time.Duration `json:"deadline"` // each call's deadline
	Start    int64         `json:"start"`
}

// Limit returns the spec of the named limit.
func (h Header) Limit(name string) (LimitSpec, bool) {
	for _, l := range h.Limits {
		if l.Name == name {
			return l, true
		}
	}
	return LimitSpec{}, false
}

// Record is one line of a history file; exactly one field is set.
type Record struct {
	Header *Header `json:"header,omitempty"`
	Op     *Op     `json:"op,omitempty"`
	Event  *Event  `json:"event,omitempty"`
}

// Writer appends records as JSON lines. It is safe for concurrent use.
type Writer struct {
	mu  sync.Mutex
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

// NewWriter writes to w; call Flush before w is closed.
func NewWriter(w io.Writer) *Writer {
	bw := bufio.NewWriterSize(w, 64<<10)
	return &Writer{w: bw, enc: json.NewEncoder(bw)}
}

func (w *Writer) write(r Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.enc.Encode(r)
	}
	return w.err
}

// Header records the run's header; write it first.
func (w *Writer) Header(h Header) error { return w.write(Record{Header: &h}) }

// Op records one operation.
func (w *Writer) Op(o Op) error { return w.write(Record{Op: &o}) }

// Event records one nemesis event.
func (w *Writer) Event(e Event) error { return w.write(Record{Event: &e}) }

// Flush writes out what is buffered.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// History is a whole run, read back.
type History struct {
	Header Header
	Ops    []Op    // sorted by Invoke
	Events []Event // sorted by Time
}

// Read parses a history. Several inputs may be given (the runner's events
// and each client's operations); exactly one of them must carry the header.
// A malformed line is an error naming its input and line; a truncated last
// line (a run killed mid-write) is dropped.
func Read(rs ...io.Reader) (*History, error) {
	h := &History{}
	headers := 0
	for i, r := range rs {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		var pending error
		for line := 1; sc.Scan(); line++ {
			if pending != nil {
				return nil, pending
			}
			b := sc.Bytes()
			if len(b) == 0 {
				continue
			}
			var rec Record
			if err := json.Unmarshal(b, &rec); err != nil {
				// Only the last line may be cut short.
				pending = fmt.Errorf("history input %d line %d: %w", i, line, err)
				continue
			}
			switch {
			case rec.Header != nil:
				headers++
				h.Header = *rec.Header
			case rec.Op != nil:
				if !rec.Op.Outcome.Valid() {
					return nil, fmt.Errorf("history input %d line %d: unknown outcome %q", i, line, rec.Op.Outcome)
				}
				h.Ops = append(h.Ops, *rec.Op)
			case rec.Event != nil:
				h.Events = append(h.Events, *rec.Event)
			default:
				return nil, fmt.Errorf("history input %d line %d: empty record", i, line)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("history input %d: %w", i, err)
		}
	}
	if headers != 1 {
		return nil, fmt.Errorf("history has %d headers, want exactly 1", headers)
	}
	if len(h.Header.Limits) == 0 {
		return nil, errors.New("history header names no limits")
	}
	h.Sort()
	return h, nil
}

// Sort orders operations by invoke time and events by time.
func (h *History) Sort() {
	sort.SliceStable(h.Ops, func(i, j int) bool { return h.Ops[i].Invoke < h.Ops[j].Invoke })
	sort.SliceStable(h.Events, func(i, j int) bool { return h.Events[i].Time < h.Events[j].Time })
}

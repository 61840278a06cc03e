package sim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/region"
)

// Key is the global key every simulated region enforces.
const Key = "rl:{acme}:global"

// step is the simulation's resolution: arrivals, decisions, deliveries and
// the invariant checks happen once per step. Times are nanoseconds, as in
// package region.
const step = int64(time.Millisecond)

// perSecond is how many units of the time base make a second: a rate per
// second is perSecond / interval.
const perSecond = float64(time.Second)

// sampleEvery is the spacing of Result.Samples.
const sampleEvery = 100 * time.Millisecond

// site is one simulated region: its Member and Home, its clock, and its
// enforcement of the key.
type site struct {
	name   string
	member *region.Member
	home   *region.Home
	drift  float64
	offset int64
	tat    int64
	lim    gcra.Limit
	limOK  bool
	share  region.Share // the share lim was computed from (-1: none yet)
	acc    float64      // fractional arrivals carried to the next step
	window int64        // units offered since the last report
	recent []int64      // units offered in each of the last reports' intervals
	next   int64        // next report, real time
}

// clock is the site's local time at real time t (ns).
func (s *site) clock(t int64) int64 { return s.offset + t + int64(math.Round(float64(t)*s.drift)) }

// enforce moves the site to the share it must enforce at local time now,
// keeping its bucket level (region.Rescale).
func (s *site) enforce(now int64, cfg region.Config, global gcra.Limit) {
	share := s.member.Share(Key, now)
	if share == s.share {
		return // the same share of the same limit: nothing to recompute
	}
	s.share = share
	lim, ok := cfg.Limit(share, global)
	switch {
	case ok == s.limOK && lim == s.lim:
		return
	case ok && s.limOK:
		s.tat = region.Rescale(s.tat, now, s.lim, lim)
	case ok:
		s.tat = now + lim.Span() // from admitting nothing: an empty bucket
	}
	s.lim, s.limOK = lim, ok
}

// admit offers units arriving evenly over the step that starts at local
// time now and returns how many passed: a limit faster than one unit per
// step (10,000/s is ten per ms) is decided at its arrivals' own times, not
// all at once.
func (s *site) admit(now, units int64) int64 {
	var n int64
	for j := range units {
		if !s.limOK {
			break
		}
		res, _ := gcra.Decide(s.tat, now+j*step/units, s.lim, 1)
		if res.Allowed {
			s.tat = res.TAT
			n++
		}
	}
	return n
}

type message struct {
	at, order int64
	from, to  int
	report    *region.Report
	reply     *region.Reply
}

type queue []message

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	return q[i].at < q[j].at || (q[i].at == q[j].at && q[i].order < q[j].order)
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(message)) }
func (q *queue) Pop() any {
	old := *q
	m := old[len(old)-1]
	*q = old[:len(old)-1]
	return m
}

// world is one run in progress.
type world struct {
	tr     Trace
	sites  []*site
	index  map[string]int
	q      queue
	order  int64
	rng    *rand.Rand
	grate  float64 // global units per second
	intvl  int64   // report interval, ns
	result Result
	series series
}

// Run runs the trace with the real region code (a Member and a Home per
// region) on a virtual clock and returns its figures. It is deterministic:
// the same trace gives the same result. It returns an error wrapping
// ErrInvalidTrace if the trace is invalid.
func Run(tr Trace) (Result, error) {
	if err := tr.Validate(); err != nil {
		return Result{}, err
	}
	w, err := newWorld(tr)
	if err != nil {
		return Result{}, err
	}
	end := tr.Duration.Nanoseconds()
	for t := int64(0); t < end; t += step {
		if err := w.tick(t); err != nil {
			return Result{}, fmt.Errorf("sim: %s at %s: %w", tr.Name, time.Duration(t), err)
		}
	}
	w.finish()
	return w.result, nil
}

func newWorld(tr Trace) (*world, error) {
	w := &world{tr: tr, index: make(map[string]int), rng: rand.New(rand.NewPCG(tr.Seed, 0x5eed)),
		grate: perSecond / float64(tr.Global.Interval), intvl: tr.Config.Interval.Nanoseconds()}
	w.result.Name = tr.Name
	n := int64(len(tr.Config.Regions))
	for i, name := range tr.Config.Regions {
		// Every clock starts at its own offset, 7.8s from the previous one.
		s := &site{name: name, drift: tr.Drift[name], share: -1, offset: int64(i) * int64(7_777_777*time.Microsecond),
			next: w.intvl * int64(i+1) / n}
		var err error
		if s.member, err = region.NewMember(tr.Config, name, name+"#1", 0); err != nil {
			return nil, err
		}
		if s.home, err = region.NewHome(tr.Config, name, s.clock(0)); err != nil {
			return nil, err
		}
		s.home.SetBursts(func(string) int64 { return tr.Global.Burst })
		w.index[name] = i
		w.sites = append(w.sites, s)
	}
	w.series.init(tr, w.grate)
	return w, nil
}

// tick runs one step at real time t: deliveries, reports, arrivals, checks.
func (w *world) tick(t int64) error {
	for w.q.Len() > 0 && w.q[0].at <= t {
		if err := w.deliver(heap.Pop(&w.q).(message), t); err != nil {
			return err
		}
	}
	for i, s := range w.sites {
		if t < s.next {
			continue
		}
		s.next += w.intvl
		if err := w.report(i, t); err != nil {
			return err
		}
	}
	var admitted int64
	offered := make([]float64, len(w.sites))
	for i, s := range w.sites {
		now := s.clock(t)
		s.enforce(now, w.tr.Config, w.tr.Global)
		d := w.tr.Demand(s.name, time.Duration(t))
		offered[i] = d
		s.acc += d * float64(step) / perSecond
		units := int64(s.acc)
		s.acc -= float64(units)
		s.window += units
		admitted += s.admit(now, units)
	}
	w.check(t)
	w.series.add(t, admitted, offered, w.shares(t))
	return nil
}

// report sends site i's reports, its demand measured over the last second
// (or the last interval, if longer): shorter windows make a low rate read
// as 0 or double in turn.
func (w *world) report(i int, t int64) error {
	s := w.sites[i]
	k := max(1, int((time.Second.Nanoseconds()+w.intvl-1)/w.intvl))
	s.recent = append(s.recent, s.window)
	if len(s.recent) > k {
		s.recent = s.recent[len(s.recent)-k:]
	}
	s.window = 0
	var sum int64
	for _, n := range s.recent {
		sum += n
	}
	demand := float64(sum) * perSecond / float64(w.intvl*int64(len(s.recent))) / w.grate
	reps, err := s.member.Reports(s.clock(t), map[string]float64{Key: demand})
	if err != nil {
		return err
	}
	for _, r := range reps {
		w.send(message{from: i, to: w.index[r.Home], report: &r}, t)
	}
	return nil
}

func (w *world) send(m message, t int64) {
	if m.from != m.to {
		if w.down(m.from, m.to, t) || w.rng.Float64() < w.tr.Loss {
			return
		}
		m.at = t + w.tr.Delay.Nanoseconds()
		if j := w.tr.Jitter.Nanoseconds(); j > 0 {
			m.at += w.rng.Int64N(j + 1)
		}
	} else {
		m.at = t
	}
	w.order++
	m.order = w.order
	heap.Push(&w.q, m)
}

func (w *world) down(a, b int, t int64) bool {
	for _, o := range w.tr.Outages {
		if o.covers(w.sites[a].name, w.sites[b].name, time.Duration(t)) {
			return true
		}
	}
	return false
}

func (w *world) deliver(m message, t int64) error {
	if m.from != m.to && w.down(m.from, m.to, t) {
		return nil
	}
	to := w.sites[m.to]
	if m.report != nil {
		rep, err := to.home.Handle(to.clock(t), *m.report)
		if err != nil {
			return err
		}
		w.send(message{from: m.to, to: m.from, reply: &rep}, t)
		return nil
	}
	_, err := to.member.Apply(to.clock(t), *m.reply)
	return err
}

// shares returns every region's enforced share at real time t.
func (w *world) shares(t int64) []region.Share {
	out := make([]region.Share, len(w.sites))
	for i, s := range w.sites {
		out[i] = s.member.Share(Key, s.clock(t))
	}
	return out
}

// check records, at t, Σ enforced shares, Σ of each region's larger of
// its enforced share and any grant in flight to it that it would take up,
// and the homes' Σ reserved.
func (w *world) check(t int64) {
	inUse := w.shares(t)
	potential := append([]region.Share(nil), inUse...)
	for _, m := range w.q {
		if m.reply == nil {
			continue
		}
		s := w.sites[m.to]
		grants, _, _ := s.member.Accepts(s.clock(t), *m.reply)
		for _, g := range grants {
			potential[m.to] = max(potential[m.to], g.Share)
		}
	}
	var sumUse, sumPot region.Share
	for i := range inUse {
		sumUse += inUse[i]
		sumPot += potential[i]
	}
	w.result.MaxInUse = max(w.result.MaxInUse, sumUse)
	w.result.MaxInFlight = max(w.result.MaxInFlight, sumPot)
	for _, s := range w.sites {
		w.result.MaxReserved = max(w.result.MaxReserved, s.home.Reserved(Key, s.clock(t)))
	}
}

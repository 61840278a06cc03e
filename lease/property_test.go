package lease

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
)

// This file checks the package's two promises on random histories of a
// whole cluster: an owner deciding directly (its own requests and those
// peers forward), peers spending leases, refreshes, returns and replies
// delayed or lost, expiries, peer restarts and ownership hand-offs.
//
//  1. Per key, over every window of length W, admitted units <= B + W/T,
//     exactly: leases add no term.
//  2. Returns credit only units never spent, and stranded units (granted,
//     neither spent nor returned) are at most (nodes-1) × Max per key in any
//     TTL, without restarts or hand-offs.

type admission struct{ at, cost int64 }

type leaseRec struct {
	key                     string
	peer                    string
	granted, spent, credits int64
	expires                 int64
	// A scheduled grant's times, on the owner's clock: unit j (from 0)
	// may not be spent before start + j×spacing. Zero spacing: at once.
	start, spacing int64
}

// spend records cost units of rec spent at now, failing the test if the
// last of them was spent before its time.
func (rec *leaseRec) spend(t *testing.T, cost, now int64) {
	t.Helper()
	if at := rec.start + (rec.spent+cost-1)*rec.spacing; rec.spacing > 0 && at > now {
		t.Fatalf("lease %+v: unit %d spent at %d, before its time %d", *rec, rec.spent+cost-1, now, at)
	}
	rec.spent += cost
}

type simMsg struct {
	at    int64
	peer  int    // index into sim.peers
	to    string // that peer's name: a restarted peer gets no old replies
	owner string
	ref   *Refresh // peer -> owner
	reply *Reply   // owner -> peer
	seq   uint64   // abandon timer when ref and reply are nil
}

type simPeer struct {
	h    *Holder
	name string
	from map[string]string // key -> the lease it holds, as "owner id"
}

type sim struct {
	t        *testing.T
	r        *rand.Rand
	now      int64
	keys     []string
	limits   map[string]gcra.Limit
	terms    Terms
	owner    string
	g        *Grantor
	tats     map[string]int64
	peers    []*simPeer
	net      []simMsg
	admitted map[string][]admission
	leases   map[string]*leaseRec // by grantor and lease id
	restarts int
	// scheduled counts scheduled grants; oldPeers is the share of
	// refreshes sent as by a peer that does not ask for them.
	scheduled int
	oldPeers  int
	lossy     bool
	cut       map[int]int64 // peer index -> partitioned from the owner until
	stalled   map[int]int64 // peer index -> its refresh loop starved until
	gap       int64         // mean time between requests: the round's load
	burst     int           // steps left in a burst at one instant
	at        int           // the node a burst hits
}

func newSim(t *testing.T, seed uint64, lossy bool) *sim {
	r := rand.New(rand.NewPCG(seed, 7))
	nodes := 2 + r.IntN(4)
	s := &sim{t: t, r: r, now: r.Int64N(1 << 40), owner: "o0", tats: map[string]int64{},
		limits: map[string]gcra.Limit{}, admitted: map[string][]admission{}, leases: map[string]*leaseRec{}, lossy: lossy, cut: map[int]int64{}, stalled: map[int]int64{}}
	for _, k := range []string{"a", "b"} {
		l := gcra.Limit{Interval: 1 + r.Int64N(2000), Burst: int64(MinBurstPerNode*nodes) + r.Int64N(40)}
		s.keys, s.limits[k] = append(s.keys, k), l
	}
	short := r.IntN(2) == 0
	if short {
		// Leases of a few dozen intervals: many expire, refresh and
		// reschedule within a history.
		for _, k := range s.keys {
			l := s.limits[k]
			l.Interval = 1000 + r.Int64N(2_000_000)
			s.limits[k] = l
		}
	}
	// From a tenth of the limit to three times it.
	s.gap = s.limits["a"].Interval * (1 + r.Int64N(20)) / 6
	if r.IntN(2) == 0 {
		s.gap = s.limits["a"].Interval / (2 + r.Int64N(10)) // saturated: schedules
	}
	s.oldPeers = r.IntN(6)
	s.terms = Terms{Max: 1 + r.Int64N(20), TTL: time.Duration(1+r.Int64N(50)) * time.Duration(s.limits["a"].Interval) * time.Microsecond}
	if short {
		s.terms.TTL = time.Duration((5 + r.Int64N(100)) * s.limits["a"].Interval)
	}
	var err error
	if s.g, err = NewGrantor(GrantorConfig{Name: s.owner}); err != nil {
		t.Fatal(err)
	}
	for i := range nodes - 1 {
		s.peers = append(s.peers, s.newPeer(fmt.Sprintf("p%d", i)))
	}
	return s
}

func (s *sim) newPeer(name string) *simPeer {
	cfg := DefaultHolderConfig()
	cfg.Name, cfg.HalfLife = name, s.terms.TTL
	h, err := NewHolder(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	return &simPeer{h: h, name: name, from: map[string]string{}}
}

func (s *sim) ttl() int64 { return s.terms.ttlNanos() }

// decide is the owner deciding keys directly at now; from is the peer that
// forwarded the request, or nil.
func (s *sim) decide(keys []string, cost int64, from *simPeer) {
	tats, lims := make([]int64, len(keys)), make([]gcra.Limit, len(keys))
	for i, k := range keys {
		tats[i], lims[i] = s.g.Effective("g", k, s.tats[k], s.now), s.limits[k]
	}
	out := make([]gcra.Result, len(keys))
	agg, err := gcra.DecideComposite(tats, s.now, lims, cost, out)
	if err != nil {
		s.t.Fatal(err)
	}
	for i, k := range keys {
		switch {
		case agg.Allowed:
			s.tats[k] = out[i].TAT
			s.admitted[k] = append(s.admitted[k], admission{s.now, cost})
		case from != nil && out[i].RetryAfter > 0:
			from.h.NoteDenial(k, out[i].RetryAfter, cost, s.now)
		}
	}
}

func (s *sim) request() {
	keys := [][]string{{"a"}, {"b"}, {"a", "b"}}[s.r.IntN(3)]
	cost := 1 + s.r.Int64N(3)
	if s.r.IntN(50) == 0 {
		cost = 1 + s.r.Int64N(s.limits["a"].Burst)
	}
	node := s.r.IntN(len(s.peers) + 1)
	if s.burst > 0 {
		node = s.at
	}
	if node == len(s.peers) {
		s.decide(keys, cost, nil)
		return
	}
	p := s.peers[node]
	refs := make([]Ref, len(keys))
	for i, k := range keys {
		refs[i] = Ref{Group: "g", Key: k, Owner: s.owner, Limit: s.limits[k], Terms: s.terms}
	}
	v, err := p.h.Spend(refs, cost, s.now)
	if err != nil {
		s.t.Fatal(err)
	}
	if v.Outcome == Await || v.Probe {
		// A saturated key: probe its owner now if nothing is in flight;
		// this request does not wait for the answer but resumes at once.
		if r, ok := p.h.Probe(s.owner, s.now); ok {
			s.send(simMsg{peer: node, owner: s.owner, ref: &r}, r.Seq)
		}
	}
	if v.Outcome == Await {
		if v, err = p.h.Resume(refs, cost, s.now, false); err != nil || v.Outcome == Await {
			s.t.Fatalf("resume without waiting: %+v, %v", v, err)
		}
	}
	switch v.Outcome {
	case Spent:
		for _, k := range keys {
			s.admitted[k] = append(s.admitted[k], admission{s.now, cost})
			s.leases[p.from[k]].spend(s.t, cost, s.now)
		}
	case Forward:
		s.decide(keys, cost, p)
	}
}

// send queues m after a random delay, or loses it (its sender abandons).
func (s *sim) send(m simMsg, seq uint64) {
	if m.to == "" {
		m.to = s.peers[m.peer].name
	}
	m.at = s.now
	if s.r.IntN(2) == 0 {
		m.at += s.r.Int64N(s.ttl()/3 + 1)
	}
	if s.lossy && (s.r.IntN(8) == 0 || s.now < s.cut[m.peer]) {
		m.ref, m.reply, m.seq = nil, nil, seq
		m.at += s.ttl() / 2
	}
	s.net = append(s.net, m)
}

func (s *sim) refreshes() {
	for i, p := range s.peers {
		if s.r.IntN(3) != 0 || s.now < s.stalled[i] {
			continue
		}
		for _, o := range p.h.Due(s.now) {
			if r, ok := p.h.Refresh(o, s.now); ok {
				s.send(simMsg{peer: i, owner: o, ref: &r}, r.Seq)
			}
		}
	}
}

// serve is the owner answering a refresh, writing each TAT through.
func (s *sim) serve(m simMsg) {
	if m.owner != s.owner {
		s.send(simMsg{peer: m.peer, to: m.to, owner: m.owner}, m.ref.Seq) // not the owner: the peer gives up
		return
	}
	rep := Reply{Owner: s.owner, Seq: m.ref.Seq}
	for _, it := range m.ref.Items {
		if s.r.IntN(10) < s.oldPeers {
			it.Scheduled = false // as from a peer that does not know schedules
		}
		if rec := s.leases[fmt.Sprint(it.Return.Grantor, it.Return.Lease)]; it.Return.Lease != 0 && rec != nil {
			if rec.peer != it.Peer {
				s.t.Fatalf("%s returns lease %d of %s", it.Peer, it.Return.Lease, rec.peer)
			}
		}
		a, err := s.g.Grant(s.tats[it.Key], s.now, it)
		if err != nil {
			s.t.Fatal(err)
		}
		s.tats[it.Key] = a.TAT
		// What the owner writes for the grant (its TAT and its
		// reservation folded, as the node persists them) stays within
		// Reach, which decides when a key is rested.
		res := s.g.Reservation("g", it.Key, s.now)
		if persist := max(a.TAT, res.Until+res.Units*it.Limit.Interval); persist-s.now > Reach(it.Limit, it.Terms, 0) {
			s.t.Fatalf("grant %+v writes a TAT %d ahead, beyond the reach %d", a, persist-s.now, Reach(it.Limit, it.Terms, 0))
		}
		if a.Credited > 0 {
			rec := s.leases[fmt.Sprint(it.Return.Grantor, it.Return.Lease)]
			rec.credits += a.Credited
			if rec.spent+rec.credits > rec.granted {
				s.t.Fatalf("lease %+v: credited units that were spent", rec)
			}
		}
		if a.Outcome == Granted {
			rec := &leaseRec{key: it.Key, peer: it.Peer, granted: a.Units, expires: s.now + a.TTL}
			if a.Spacing > 0 {
				rec.start, rec.spacing = s.now+a.Start, a.Spacing
				s.scheduled++
			}
			s.leases[fmt.Sprint(s.owner, a.Lease)] = rec
		}
		rep.Answers = append(rep.Answers, a)
	}
	s.send(simMsg{peer: m.peer, to: m.to, owner: m.owner, reply: &rep}, m.ref.Seq)
}

func (s *sim) deliver(m simMsg) {
	p := s.peers[m.peer]
	switch {
	case p.name != m.to && m.ref == nil:
		// For a process that no longer exists.
	case m.ref != nil:
		s.serve(m)
	case m.reply != nil:
		var keys []string
		if in := p.h.inflight[m.owner]; in != nil {
			keys = in.keys
		}
		ok, err := p.h.Apply(*m.reply, s.now)
		if err != nil {
			s.t.Fatal(err)
		}
		for i, a := range m.reply.Answers {
			if ok && a.Outcome == Granted {
				p.from[keys[i]] = fmt.Sprint(a.Grantor, a.Lease)
			}
		}
	default:
		p.h.Abandon(m.owner, m.seq)
	}
}

// handoff moves the key to a new owner the way the wiring does: the old
// owner persists each key's effective TAT and reservation; the new one
// loads and adopts them.
func (s *sim) handoff() {
	owner := fmt.Sprintf("o%d", s.r.Int())
	g, err := NewGrantor(GrantorConfig{Name: owner})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, k := range s.keys {
		res := s.g.Reservation("g", k, s.now)
		s.tats[k] = s.g.Effective("g", k, s.tats[k], s.now)
		if err := g.Adopt("g", k, s.limits[k].Interval, res, s.now); err != nil {
			s.t.Fatal(err)
		}
	}
	s.g, s.owner = g, owner
}

func (s *sim) step(chaos bool) {
	switch x := s.r.IntN(1000); {
	case s.burst > 0:
		s.burst-- // many requests at one instant
		if x < 50 {
			s.at = s.r.IntN(len(s.peers) + 1) // hitting another node
		}
	case x < 5:
		s.now += s.r.Int64N(3 * s.ttl()) // a quiet spell
	case x < 10:
		s.burst, s.at = s.r.IntN(60), s.r.IntN(len(s.peers)+1)
	default:
		s.now += s.r.Int64N(2*s.gap + 1)
	}
	slices.SortStableFunc(s.net, func(a, b simMsg) int { return int(min(max(a.at-b.at, -1), 1)) })
	for len(s.net) > 0 && s.net[0].at <= s.now {
		m := s.net[0]
		s.net = s.net[1:]
		s.deliver(m)
	}
	s.request()
	s.refreshes()
	switch x := s.r.IntN(1000); {
	case x < 10:
		for _, f := range s.g.Sweep(s.now) {
			s.tats[f.Key] = max(s.tats[f.Key], f.TAT)
		}
	case x < 12:
		s.peers[s.r.IntN(len(s.peers))].h.Sweep(s.now)
	case x < 13:
		s.attack()
	case x < 14:
		// The peer's refresh loop starves (CPU hogs, a GC pause) while
		// its request path still spends what it holds.
		s.stalled[s.r.IntN(len(s.peers))] = s.now + s.r.Int64N(2*s.ttl())
	case s.lossy && x < 16:
		// A partition: the peer keeps spending what it holds, and
		// nothing it sends or is sent arrives.
		s.cut[s.r.IntN(len(s.peers))] = s.now + s.r.Int64N(3*s.ttl())
	case chaos && x < 18:
		i := s.r.IntN(len(s.peers))
		s.restarts++
		s.peers[i] = s.newPeer(fmt.Sprintf("p%d#%d", i, s.restarts))
	case chaos && x < 19:
		s.handoff()
	}
}

// attack times requests where the accounting is most fragile: a peer
// spends everything it holds on a key at the last moment (just before its
// lease expires, or just before a refresh settles it), and the owner then
// admits all it can on the same key at once.
func (s *sim) attack() {
	i := s.r.IntN(len(s.peers))
	p := s.peers[i]
	var key string
	for _, k := range s.keys {
		if p.h.Units(k, s.now) > 0 && s.leases[p.from[k]] != nil {
			key = k
		}
	}
	if key == "" {
		return
	}
	ref := Ref{Group: "g", Key: key, Owner: s.owner, Limit: s.limits[key], Terms: s.terms}
	k := p.h.keys[key]
	if last := k.nextAt + (k.units-1)*k.spacing; s.r.IntN(2) == 0 {
		s.now = max(s.now, k.expires-1)
	} else if k.spacing > 0 && last < k.expires {
		s.now = max(s.now, last) // a schedule spent all at once, at its end
	}
	for p.h.Units(key, s.now) > 0 {
		v, err := p.h.Spend([]Ref{ref}, 1, s.now)
		if err == nil && v.Outcome == Refused && k.spacing > 0 {
			break // the rest of the schedule is due after the lease ends
		}
		if err != nil || v.Outcome != Spent {
			s.t.Fatalf("spend of a held unit: %+v %v", v, err)
		}
		s.admitted[key] = append(s.admitted[key], admission{s.now, 1})
		s.leases[p.from[key]].spend(s.t, 1, s.now)
	}
	if rec := s.leases[p.from[key]]; s.now < rec.expires && s.r.IntN(2) == 0 {
		if r, ok := p.h.Refresh(s.owner, s.now); ok {
			s.serve(simMsg{peer: i, to: p.name, owner: s.owner, ref: &r})
		}
	} else {
		s.now = max(s.now, rec.expires)
	}
	for range s.limits[key].Burst + 1 {
		s.decide([]string{key}, 1, nil)
	}
}

// checkWindow asserts admitted <= B + W/T over every window bounded by
// two admissions, in O(n): with prefix sums S, the window [i, j] holds
// (S_j - S_{i-1}) units, and the bound times T is
// (S_j·T - t_j) - (S_{i-1}·T - t_i) <= B·T.
func checkWindow(l gcra.Limit, adm []admission) error {
	var sum int64
	lowest := int64(1) << 62
	for _, a := range adm {
		lowest = min(lowest, sum*l.Interval-a.at)
		sum += a.cost
		if over := sum*l.Interval - a.at - lowest; over > l.Span() {
			return fmt.Errorf("limit %+v: a window ending at %d admits %d µs of cost over B·T = %d", l, a.at, over, l.Span())
		}
	}
	return nil
}

// naiveCheckWindow is checkWindow by brute force, its reference.
func naiveCheckWindow(l gcra.Limit, adm []admission) error {
	for i := range adm {
		var sum int64
		for j := i; j < len(adm); j++ {
			sum += adm[j].cost
			if w := adm[j].at - adm[i].at; sum*l.Interval > l.Span()+w {
				return fmt.Errorf("limit %+v: %d units in [%d, %d]", l, sum, adm[i].at, adm[j].at)
			}
		}
	}
	return nil
}

func TestCheckWindow_matchesNaiveReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		l := gcra.Limit{Interval: 1 + r.Int64N(10), Burst: 1 + r.Int64N(5)}
		var adm []admission
		at := int64(0)
		for range r.IntN(30) {
			at += r.Int64N(3 * l.Interval)
			adm = append(adm, admission{at, 1 + r.Int64N(3)})
		}
		fast, naive := checkWindow(l, adm), naiveCheckWindow(l, adm)
		if (fast == nil) != (naive == nil) {
			t.Fatalf("limit %+v admissions %v: fast %v, naive %v", l, adm, fast, naive)
		}
	}
}

// checkStranded asserts that in every half-open window of one TTL, the
// leases on a key that expired with units neither spent nor returned
// held at most (nodes-1) × Max units.
func (s *sim) checkStranded() {
	bound := int64(len(s.peers)) * s.terms.Max
	for _, k := range s.keys {
		var stranded []leaseRec
		for _, rec := range s.leases {
			if rec.key == k && rec.granted-rec.spent-rec.credits > 0 {
				stranded = append(stranded, *rec)
			}
		}
		slices.SortFunc(stranded, func(a, b leaseRec) int { return int(min(max(a.expires-b.expires, -1), 1)) })
		var in int64
		lo := 0
		for _, rec := range stranded {
			in += rec.granted - rec.spent - rec.credits
			for stranded[lo].expires <= rec.expires-s.ttl() {
				in -= stranded[lo].granted - stranded[lo].spent - stranded[lo].credits
				lo++
			}
			if in > bound {
				s.t.Fatalf("key %s: %d units stranded within one TTL, bound %d", k, in, bound)
			}
		}
	}
}

func runSims(t *testing.T, chaos, lossy bool) {
	rounds, steps := 60, 3000
	if testing.Short() || raceEnabled {
		rounds = 15
	}
	var spent, granted int64
	scheduled := 0
	for round := range rounds {
		s := newSim(t, uint64(round), lossy)
		for range steps {
			s.step(chaos)
		}
		for _, k := range s.keys {
			if err := checkWindow(s.limits[k], s.admitted[k]); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if !chaos {
			s.checkStranded()
		}
		for _, rec := range s.leases {
			if rec.spent+rec.credits > rec.granted {
				t.Fatalf("round %d: lease %+v spent or credited more than granted", round, rec)
			}
			spent += rec.spent
			granted += rec.granted
		}
		scheduled += s.scheduled
	}
	// The histories must exercise leases, or the bound says nothing.
	if spent == 0 || granted == 0 || scheduled == 0 {
		t.Fatalf("no leased unit was spent (granted %d), or no grant was scheduled (%d)", granted, scheduled)
	}
	t.Logf("%d units granted, %d spent from leases, %d scheduled grants", granted, spent, scheduled)
}

func TestLease_property_admittedWithinBound(t *testing.T) { runSims(t, false, false) }
func TestLease_property_lossyNetwork(t *testing.T)        { runSims(t, false, true) }
func TestLease_property_restartsAndHandoffs(t *testing.T) { runSims(t, true, true) }

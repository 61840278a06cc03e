package routing

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/cespare/xxhash/v2"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/ring"
)

// HashXX64 names the hash that places a group on a partition:
// xxhash64(group) mod len(owners).
const HashXX64 = "xxhash64"

// Bounds on a Topology answer a client accepts: far above any real cluster
// and policy, low enough that a broken or hostile node cannot make a client
// hold much memory.
const (
	MaxMembers    = 1024
	MaxPartitions = 1 << 16
	MaxRules      = 1024
)

// ErrInvalidTopology wraps every reason NewTable refuses an answer.
var ErrInvalidTopology = errors.New("routing: invalid topology")

// Rule is one group rule (see policy.GroupRule): a request with a non-empty
// value for every descriptor in Match has the value of Group as its group.
type Rule struct {
	Match []string
	Group string
}

// Response builds a node's Topology answer from its ring's partitions, the
// public gRPC address of each member by name, and the policy's group rules
// and version. A member without an address, or with one whose host is
// unspecified (0.0.0.0, ::), is published without one: no client can dial
// it. Response does not retain its arguments.
func Response(p ring.Partitions, addrs map[string]string, rules []Rule, policyVersion string) *weirv1.TopologyResponse {
	out := &weirv1.TopologyResponse{
		RingEpoch:     p.Epoch,
		Owners:        p.Owners,
		Hash:          HashXX64,
		PolicyVersion: policyVersion,
		Members:       make([]*weirv1.Member, len(p.Members)),
		GroupRules:    make([]*weirv1.GroupRule, len(rules)),
	}
	for i, name := range p.Members {
		out.Members[i] = &weirv1.Member{Name: name, Address: dialable(addrs[name])}
	}
	for i, r := range rules {
		out.GroupRules[i] = &weirv1.GroupRule{Match: r.Match, Group: r.Group}
	}
	return out
}

// dialable returns addr, or "" when a client could not dial it.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" || host == "" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return ""
	}
	return addr
}

// Table is a checked Topology answer. It is immutable and safe for
// concurrent use.
type Table struct {
	epoch         uint64
	policyVersion string
	names, addrs  []string
	owners        []uint32
	rules         []Rule
}

// NewTable checks resp and returns it as a Table, or an error wrapping
// ErrInvalidTopology: an unknown hash, a zero epoch, an owner index out of
// range, a rule whose group is not among its match descriptors, or more
// members, partitions or rules than the Max bounds. resp is not retained.
func NewTable(resp *weirv1.TopologyResponse) (*Table, error) {
	switch {
	case resp.GetHash() != HashXX64:
		return nil, fmt.Errorf("%w: hash %q, want %q", ErrInvalidTopology, resp.GetHash(), HashXX64)
	case resp.GetRingEpoch() == 0:
		return nil, fmt.Errorf("%w: zero ring epoch", ErrInvalidTopology)
	case len(resp.GetMembers()) > MaxMembers || len(resp.GetOwners()) > MaxPartitions || len(resp.GetGroupRules()) > MaxRules:
		return nil, fmt.Errorf("%w: %d members, %d partitions, %d rules exceed %d, %d, %d", ErrInvalidTopology,
			len(resp.GetMembers()), len(resp.GetOwners()), len(resp.GetGroupRules()), MaxMembers, MaxPartitions, MaxRules)
	}
	t := &Table{
		epoch:         resp.GetRingEpoch(),
		policyVersion: resp.GetPolicyVersion(),
		owners:        append([]uint32(nil), resp.GetOwners()...),
	}
	for _, m := range resp.GetMembers() {
		t.names = append(t.names, m.GetName())
		t.addrs = append(t.addrs, dialable(m.GetAddress()))
	}
	for p, o := range t.owners {
		if int(o) >= len(t.names) {
			return nil, fmt.Errorf("%w: partition %d owned by member %d of %d", ErrInvalidTopology, p, o, len(t.names))
		}
	}
	for i, r := range resp.GetGroupRules() {
		rule := Rule{Match: append([]string(nil), r.GetMatch()...), Group: r.GetGroup()}
		if !slices.Contains(rule.Match, rule.Group) {
			return nil, fmt.Errorf("%w: rule %d: group %q is not among its match descriptors", ErrInvalidTopology, i, rule.Group)
		}
		t.rules = append(t.rules, rule)
	}
	return t, nil
}

// Epoch is the ring epoch the table was built from.
func (t *Table) Epoch() uint64 { return t.epoch }

// PolicyVersion is the version of the policy the rules come from.
func (t *Table) PolicyVersion() string { return t.policyVersion }

// Members returns how many members the table names.
func (t *Table) Members() int { return len(t.names) }

// Name and Address return member i's name and public address ("" when it
// published none). i must be below Members.
func (t *Table) Name(i int) string    { return t.names[i] }
func (t *Table) Address(i int) string { return t.addrs[i] }

// Group returns the group of a request with these descriptors: the value of
// the first rule's Group descriptor whose Match descriptors all have
// non-empty values. It returns false when no rule matches (the request
// matches no limit, and any node answers it alike).
func (t *Table) Group(desc map[string]string) (string, bool) {
	for _, r := range t.rules {
		if matches(r.Match, desc) {
			return desc[r.Group], true
		}
	}
	return "", false
}

func matches(names []string, desc map[string]string) bool {
	for _, n := range names {
		if desc[n] == "" {
			return false
		}
	}
	return true
}

// Owner returns the index of the member that owns the group of a request
// with these descriptors, and false when the request has no group or the
// ring is empty. It does not allocate.
func (t *Table) Owner(desc map[string]string) (int, bool) {
	g, ok := t.Group(desc)
	if !ok {
		return 0, false
	}
	return t.GroupOwner(g)
}

// GroupOwner returns the index of the member that owns group g (a
// permit's or reservation's group, ticket.Group), and false when the ring
// is empty. It does not allocate.
func (t *Table) GroupOwner(g string) (int, bool) {
	if len(t.owners) == 0 {
		return 0, false
	}
	return int(t.owners[xxhash.Sum64String(g)%uint64(len(t.owners))]), true
}

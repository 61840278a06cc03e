package forward

import (
	"maps"
	"sync/atomic"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/regionlink"
	"github.com/weirhq/weir/ring"
)

// Routes is the membership as routing sees it: the ring (group → owner
// name) and each member's peer address. It is built first, before the
// owner, the region link and the Router, which all read it; the Router
// changes it (SetMembers). Safe for concurrent use.
type Routes struct {
	local string
	ring  *ring.Ring
	addrs atomic.Pointer[map[string]string] // member name -> peer address
}

var _ regionlink.Owners = (*Routes)(nil)

// NewRoutes returns the routes of node local over r. Until the first
// SetMembers the ring is r's (usually empty: this node owns every group).
func NewRoutes(local string, r *ring.Ring) *Routes {
	rt := &Routes{local: local, ring: r}
	rt.addrs.Store(&map[string]string{})
	return rt
}

// Local returns this node's name.
func (rt *Routes) Local() string { return rt.local }

// Owner is the node that decides group; this node while the ring is empty.
// It is owner.Ring.
func (rt *Routes) Owner(group string) string {
	if o, ok := rt.ring.Owner(group); ok {
		return o
	}
	return rt.local
}

// Route is where group is decided now: its owner, the owner's peer address
// ("" for this node, or while the address is unknown) and the ring epoch
// they were read at. The forwarding layer computes it once per request.
func (rt *Routes) Route(group string) decide.Route {
	owner, epoch, ok := rt.ring.OwnerAt(group)
	if !ok || owner == rt.local {
		return decide.Route{Owner: rt.local, Epoch: epoch}
	}
	return decide.Route{Owner: owner, Addr: (*rt.addrs.Load())[owner], Epoch: epoch}
}

// Addr returns the peer address of member name, "" when unknown.
func (rt *Routes) Addr(name string) string { return (*rt.addrs.Load())[name] }

// Members returns how many members this node currently sees, itself
// included; 1 before the first SetMembers. It is the member count for
// fallback shares (limiter.WithMembers) and for lease sizing.
func (rt *Routes) Members() int { return max(1, len(*rt.addrs.Load())) }

// RegionOwner returns the peer address of group's owner in this cluster,
// or local when this node owns it; "" and false while the owner's address
// is unknown. It is regionlink.Owners.
func (rt *Routes) RegionOwner(group string) (addr string, local bool) {
	owner := rt.Owner(group)
	if owner == rt.local {
		return "", true
	}
	return (*rt.addrs.Load())[owner], false
}

// addrsNow returns the current name -> address map; the caller must not
// modify it.
func (rt *Routes) addrsNow() map[string]string { return *rt.addrs.Load() }

func (rt *Routes) setAddrs(members map[string]string) { rt.addrs.Store(new(maps.Clone(members))) }

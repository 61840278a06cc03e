package region

// MemberStats are a Member's keys of one limit at one moment, for gauges.
type MemberStats struct {
	// Keys counts the keys that hold or recently held a grant; AtFloor
	// those of them whose grant has expired (cut off from their home, or
	// their home stopped granting).
	Keys, AtFloor int
	// Share is the sum of the shares those keys enforce.
	Share Share
}

// Stats returns the Member's keys at now grouped by label(key), the name
// of the key's limit (bounded cardinality: never the key itself). Keys
// never granted anything are not counted: they are at the floor.
func (m *Member) Stats(now int64, label func(key string) string) map[string]MemberStats {
	out := make(map[string]MemberStats)
	for k := range m.keys {
		l := label(k)
		s := out[l]
		s.Keys++
		if m.AtFloor(k, now) {
			s.AtFloor++
		}
		s.Share += m.Share(k, now)
		out[l] = s
	}
	return out
}

// HomeStats are a Home's keys of one limit at one moment, for gauges.
type HomeStats struct {
	Keys int
	// Reserved is, per region, the sum over the keys of the share the
	// home holds for it (at least its floor); Demand the sum of the
	// demands it last reported, for regions heard from within a TTL.
	Reserved map[string]Share
	Demand   map[string]float64
	// Silent lists the regions that have reported on some key of the
	// limit but not within a TTL: cut off from this home, or gone.
	Silent []string
}

// Stats returns the Home's keys at now grouped by label(key), as for
// Member.Stats.
func (h *Home) Stats(now int64, label func(key string) string) map[string]HomeStats {
	out := make(map[string]HomeStats)
	silent := make(map[string]map[string]bool)
	for k, l := range h.keys {
		name := label(k)
		s, ok := out[name]
		if !ok {
			s = HomeStats{Reserved: make(map[string]Share), Demand: make(map[string]float64)}
			silent[name] = make(map[string]bool)
		}
		s.Keys++
		for _, r := range h.cfg.Regions {
			a := l.regions[r]
			s.Reserved[r] += a.reserved(now, h.cfg.Floor)
			switch {
			case a == nil:
			case now-a.heard <= h.cfg.ttl():
				s.Demand[r] += a.demand
			default:
				silent[name][r] = true
			}
		}
		out[name] = s
	}
	for name, s := range out {
		for _, r := range h.cfg.Regions {
			if silent[name][r] {
				s.Silent = append(s.Silent, r)
			}
		}
		out[name] = s
	}
	return out
}

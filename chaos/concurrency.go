package chaos

import (
	"time"

	"github.com/weirhq/weir/chaos/workload"
)

// ConcurrencyPolicy is the concurrency scenario's policy: at most 5
// permits live per tenant, each for 3 s unless renewed or released,
// failing closed (a fault never hands out a slot it cannot count).
const ConcurrencyPolicy = `version: concurrency.1
limits:
  - name: exports
    kind: concurrency
    match: [tenant]
    max_in_flight: 5
    ttl: 3s
    on_failure: closed
`

// concurrencyWorkload offers the default rate over four tenants, far more
// acquires than 5 slots each can hold: callers hold a permit for 50 ms to
// 1 s and release it, 10 % "crash" and never release (their slots come
// back after the 3 s TTL), 5 % renew half-way.
func concurrencyWorkload() *Workload {
	return &Workload{
		Policy: []byte(ConcurrencyPolicy),
		Classes: []workload.Class{{Name: "exports", Weight: 1, Keys: 4, Cost: 1, Limits: []string{"exports"},
			Descriptors: map[string]string{"tenant": "t{k}"},
			Hold:        &workload.Hold{Min: 50 * time.Millisecond, Max: time.Second, Crash: 0.1, Renew: 0.05}}},
		VictimGroup: "t0",
	}
}

// ConcurrencySuite is the concurrency class: callers acquire, hold and
// release permits through every node while the owner of tenant t0 is
// SIGKILLed and restarted. At no instant are more than 5 permits surely
// held on one tenant (the new owner loads the live permits from Redis),
// and outside the fault no acquire is refused while the permits that can
// still be live leave a slot (crashed callers' slots come back at TTL).
func ConcurrencySuite() []Scenario {
	s := scenario("kill-owner", 12*time.Second)
	s.Nemesis.Name = "concurrency-kill-owner"
	s.Nemesis.Summary = "callers acquire, hold and release permits (10 % never release) through every node; the owner of tenant t0 is SIGKILLed, then restarted"
	s.Workload = concurrencyWorkload()
	return []Scenario{s}
}

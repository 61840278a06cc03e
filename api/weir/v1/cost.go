package weirv1

// DefaultCost returns the value of DecideRequest.Cost for a Go API where a
// zero cost means "the default": nil (absent on the wire, which the server
// reads as 1) for 0, a pointer to cost otherwise. An explicit 0 on the wire
// is INVALID_ARGUMENT, so callers that take 0 to mean 1 must send nothing.
func DefaultCost(cost int64) *int64 {
	if cost == 0 {
		return nil
	}
	return &cost
}

// Package workload is the client side of a chaos run: it sends Decide calls
// at a set rate, open loop, to random nodes, for a mix of request classes
// (hot keys driven past their limit, cold keys spread wide, composite and
// strict limits), each call with its own deadline, and records every
// operation in a history.
//
// Open loop means the schedule does not wait for answers: a stalled node
// does not slow the offered load, it shows up as timeouts, which is what a
// fleet of independent callers would see. Config.Workers switches to a
// closed loop instead: a fixed pool of workers, each bound to one node,
// each sending its next call once the previous is answered, the way a
// service's worker pool hammers one hot key.
package workload

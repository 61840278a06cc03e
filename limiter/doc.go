// Package limiter is weir's decision core: it resolves a request's
// descriptors against the active policy into limit keys, decides them
// atomically with GCRA through a Store (in memory, or Redis), and reports a
// Decision with one entry per matched limit.
package limiter

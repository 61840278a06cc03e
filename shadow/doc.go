// Package shadow answers the question shadow mode exists for: which callers
// would a new limit hit? A Recorder observes every decision (install it
// with limiter.WithObserver), counts each shadow limit's would-denies and
// keeps its most denied keys in a bounded Space-Saving sketch per time
// bucket, never a map of every key. Nodes serve the report at Path;
// `weir shadow` fetches it from every node and merges it with Merge.
//
//	rec, _ := shadow.New(shadow.DefaultConfig(), nil)
//	lim, _ := limiter.New(cfg, policies, store, logger, reg, limiter.WithObserver(rec.Observe))
//	mux.Handle(shadow.Path, rec.Handler(nodeName))
//
// Counts are per receiving node (the node that answered the caller), so a
// cluster's report is the merge of every node's.
package shadow

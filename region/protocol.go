package region

// Report is one region's batched demand report to one home region, sent
// every Config.Interval: every global key homed there that the region
// wants or holds a share of.
type Report struct {
	// From is the reporting region; Reporter the process that sent it
	// (node name plus boot incarnation), whose grants are told apart from
	// another process's in the same region.
	From, Reporter string
	// Home is the region the report is for.
	Home string
	// Seq numbers the reporter's reports, increasing (across restarts too:
	// see NewMember); the reply echoes it and its grants carry it.
	Seq   uint64
	Items []Demand
}

// Demand is one key of a report.
type Demand struct {
	Key string
	// Demand is the region's recent demand on the key (units offered,
	// admitted or not, per second) as a fraction of the global rate:
	// 0.25 asks for a quarter of the limit. Finite, >= 0.
	Demand float64
	// Ack is the Seq of the newest grant the reporter has applied for the
	// key (0 if none). It stopped using every older grant.
	Ack uint64
}

// Reply is a home's answer to one Report: one Grant per item, in order.
type Reply struct {
	Home, To, Reporter string
	Seq                uint64
	Grants             []Grant
}

// Grant is a share of one key for the reporting region, valid for TTL
// nanoseconds from the moment the report was sent (on the region's clock).
type Grant struct {
	Key   string
	Share Share
	TTL   int64
}

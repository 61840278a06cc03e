package peer

// Bounds of one forwarded item that size the wire (grpcopts.go): what the
// owner's validation (intake.Validator) accepts at most, by default. The
// intake package derives them from the public API's limits and checks at
// compile time that they equal these.
const (
	// DefaultMaxKeys bounds the keys (limits) of one item: a composite
	// decision has one key per matched limit.
	DefaultMaxKeys = 256
	// DefaultMaxKeyBytes is the longest key the public API can produce:
	// "weir:{" + group + "}:" + name + (":" + value) per descriptor, with a
	// 64-byte name, at most 32 values of at most 256 bytes, each byte
	// escaped to three at worst.
	DefaultMaxKeyBytes = 25448
)

// Package ticket is the codec of the opaque tokens weir hands callers for
// what outlives a decision: a permit (the slots an admitted request holds
// on its concurrency limits until Release or their TTL) and a reservation
// (the charge of a Reserve decision until Settle or its settle window).
//
// A token names the group (which routes it to the owner, as a decision's
// group does), the keys it holds, and a 16-byte id the owner drew from
// crypto/rand. The id is a bearer secret: whoever holds the token may
// release, renew or settle it. Tokens are not signed: a forged one names
// keys and an id the owner does not hold, and changes nothing.
//
// Usage:
//
//	tok, _ := ticket.Encode(ticket.Ticket{Kind: ticket.Permit, Group: "acme", Keys: keys, ID: id})
//	t, err := ticket.Decode(tok) // err wraps ErrMalformed for any bad input
//
// Pure: no I/O, no clock, no state; safe for concurrent use.
package ticket

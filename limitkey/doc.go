// Package limitkey is the one codec of weir's storage keys: it builds them,
// escapes and unescapes their values, and parses them back into their
// fields. policy builds keys with it, redisbackend and the owner read hash
// tags and groups with it, so the format lives in one place. It imports
// nothing of weir's.
//
// The grammar (the format is stable across versions: keys live in Redis
// and travel between nodes of different versions during an upgrade):
//
//	key    = "weir:{" group "}:" name 1*(":" value)
//	group  = escaped    ; the value the limit groups by, also among the values
//	value  = escaped    ; one per descriptor the limit matches, in policy order
//	name   = the limit's name, which a policy never lets hold % { } :
//
// Escaping: in the group and in every value the four bytes '%', '{', '}'
// and ':' are written as "%25", "%7B", "%7D" and "%3A" (upper-case hex);
// every other byte, including non-UTF-8 bytes, is written as it is. Why:
//
//   - '{' and '}' are Redis Cluster's hash-tag delimiters. The group is the
//     key's hash tag (the text between its first '{' and the first '}'
//     after it), so an unescaped '}' in a group would end the tag early
//     and a '{' or '}' in a value could never move it; keys that share a
//     group value therefore share a hash slot and an owner, whatever the
//     values hold.
//   - ':' separates fields: escaped values never split, so the fields of a
//     key are found by cutting at ':' without knowing the policy.
//   - '%' starts an escape, so it is escaped itself: the mapping is one to
//     one and Unescape(Escape(v)) == v for every byte string v.
//
// Unescape keeps a malformed escape as it is: a key from elsewhere that
// holds one names no value that Escape would produce.
//
// Usage:
//
//	key := limitkey.Key("acme", "per-user", "acme", "u:7") // weir:{acme}:per-user:acme:u%3A7
//	p, ok := limitkey.Split(key)   // p.Name "per-user", p.Value(1) "u%3A7"
//	g, _ := limitkey.Group(key)    // "acme", the value decisions route by
//	tag := limitkey.HashTag(key)   // "acme", what Redis Cluster hashes
//	same := tag == limitkey.GroupTag(g)
//
// Parsing (Split, LimitName, HashTag) never allocates; Group and Unescape
// allocate only for a value that holds an escape. Key allocates the key
// only; Append appends to the caller's buffer. Every function is pure and
// safe for concurrent use.
package limitkey

package server

import (
	"fmt"
	"strconv"
)

// loneSurrogate finds a \uXXXX escape in a JSON text that encodes half of a
// UTF-16 surrogate pair without its other half (such as "\udc00"), which
// protojson refuses with the misleading message "unexpected EOF". It
// returns a message naming the escape and its byte offset, or "" when there
// is none. Only called once decoding failed, so it costs nothing on valid
// bodies.
func loneSurrogate(body []byte) string {
	inString := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(body):
			if body[i+1] != 'u' {
				i++ // skip the escaped byte, which may be a quote
				continue
			}
			r, ok := hex4(body, i+2)
			if !ok {
				continue
			}
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return fmt.Sprintf("unpaired UTF-16 surrogate escape %s at byte %d; strings must be valid Unicode", body[i:i+6], i)
			case r >= 0xD800 && r <= 0xDBFF:
				lo, ok := rune(0), i+7 < len(body) && body[i+6] == '\\' && body[i+7] == 'u'
				if ok {
					lo, ok = hex4(body, i+8)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return fmt.Sprintf("unpaired UTF-16 surrogate escape %s at byte %d; strings must be valid Unicode", body[i:i+6], i)
				}
				i += 11 // the pair
			default:
				i += 5
			}
		}
	}
	return ""
}

// hex4 reads four hex digits at b[at:].
func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[at:at+4]), 16, 16)
	return rune(v), err == nil
}

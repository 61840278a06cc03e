package limitkey

import "strings"

// Prefix starts every key.
const Prefix = "weir:"

// Len returns the length of the key Key builds from the same arguments.
func Len(group, name string, values ...string) int {
	// "weir:{" + group + "}:" + name + (":" + value)*
	n := len(Prefix) + len("{}:") + EscapedLen(group) + len(name)
	for _, v := range values {
		n += 1 + EscapedLen(v)
	}
	return n
}

// Key returns the key of limit name for group and values (see the package
// doc for the grammar): group and values are escaped, name is written as it
// is. It allocates once, the key.
func Key(group, name string, values ...string) string {
	var b strings.Builder
	b.Grow(Len(group, name, values...))
	b.WriteString(Prefix)
	b.WriteByte('{')
	writeEscaped(&b, group)
	b.WriteString("}:")
	b.WriteString(name)
	for _, v := range values {
		b.WriteByte(':')
		writeEscaped(&b, v)
	}
	return b.String()
}

// Append appends the key Key would return to dst and returns the extended
// slice. It allocates only when dst lacks the room (see Len).
func Append(dst []byte, group, name string, values ...string) []byte {
	dst = append(dst, Prefix...)
	dst = append(dst, '{')
	dst = AppendEscaped(dst, group)
	dst = append(dst, "}:"...)
	dst = append(dst, name...)
	for _, v := range values {
		dst = append(dst, ':')
		dst = AppendEscaped(dst, v)
	}
	return dst
}

// GroupTag returns the hash tag of every key of group: the group escaped.
// HashTag(Key(group, ...)) == GroupTag(group). It allocates only when group
// holds a byte to escape.
func GroupTag(group string) string { return Escape(group) }

// Escape returns s with '%', '{', '}' and ':' written as %25, %7B, %7D and
// %3A. It returns s itself, without allocating, when nothing needs escaping.
func Escape(s string) string {
	n := EscapedLen(s)
	if n == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(n)
	writeEscaped(&b, s)
	return b.String()
}

// EscapedLen returns len(Escape(s)) without building it.
func EscapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n += 2
		}
	}
	return n
}

// AppendEscaped appends Escape(s) to dst and returns the extended slice.
func AppendEscaped(dst []byte, s string) []byte {
	for {
		i := nextEscape(s)
		dst = append(dst, s[:i]...)
		if i == len(s) {
			return dst
		}
		dst = append(dst, escapeOf(s[i])...)
		s = s[i+1:]
	}
}

func writeEscaped(b *strings.Builder, s string) {
	for {
		i := nextEscape(s)
		b.WriteString(s[:i])
		if i == len(s) {
			return
		}
		b.WriteString(escapeOf(s[i]))
		s = s[i+1:]
	}
}

func needsEscape(c byte) bool { return c == '%' || c == '{' || c == '}' || c == ':' }

// nextEscape returns the index of the first byte of s to escape, or len(s).
func nextEscape(s string) int {
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			return i
		}
	}
	return len(s)
}

// escapeOf returns the escape of a byte needsEscape reports.
func escapeOf(c byte) string {
	switch c {
	case '%':
		return "%25"
	case '{':
		return "%7B"
	case '}':
		return "%7D"
	}
	return "%3A"
}

// Unescape reverses Escape: it decodes the four escapes Escape writes
// (%25, %7B, %7D, %3A) and keeps every other byte as it is, including a
// '%' that starts none of them (Escape never writes one), so it accepts any
// string and Unescape(Escape(v)) == v for every v. It returns s itself,
// without allocating, when s holds no '%'.
func Unescape(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if c, ok := escapeAt(s, i); ok {
			b.WriteByte(c)
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// escapeAt reports whether one of Escape's escapes starts at s[i], and the
// byte it stands for.
func escapeAt(s string, i int) (byte, bool) {
	if s[i] != '%' || i+2 >= len(s) {
		return 0, false
	}
	switch s[i+1 : i+3] {
	case "25":
		return '%', true
	case "7B":
		return '{', true
	case "7D":
		return '}', true
	case "3A":
		return ':', true
	}
	return 0, false
}

// canonical reports whether s is the escape of some value: it holds none
// of '{', '}', ':', and every '%' starts an escape.
func canonical(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '}', ':':
			return false
		case '%':
			if _, ok := escapeAt(s, i); !ok {
				return false
			}
		}
	}
	return true
}

package limitkey_test

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/limitkey"
)

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		group, name string
		values      []string
		want        string
	}{
		{"t1", "per-tenant", []string{"t1"}, "weir:{t1}:per-tenant:t1"},
		{"t1", "per-user", []string{"t1", "u1"}, "weir:{t1}:per-user:t1:u1"},
		{"/a", "per-route", []string{"t1", "/a"}, "weir:{/a}:per-route:t1:/a"},
		{"a}b{c", "per-user", []string{"a}b{c", "x:y%z"}, "weir:{a%7Db%7Bc}:per-user:a%7Db%7Bc:x%3Ay%25z"},
		{"%3A", "l", []string{"%"}, "weir:{%253A}:l:%25"}, // an escape in a value is escaped again
		{"\xff\xfe", "l", []string{"\x00"}, "weir:{\xff\xfe}:l:\x00"},
		{"g", "l", []string{""}, "weir:{g}:l:"},
	} {
		if got := limitkey.Key(tc.group, tc.name, tc.values...); got != tc.want {
			t.Errorf("Key(%q, %q, %q) = %q, want %q", tc.group, tc.name, tc.values, got, tc.want)
		}
		if got := string(limitkey.Append([]byte("x"), tc.group, tc.name, tc.values...)); got != "x"+tc.want {
			t.Errorf("Append(%q, %q, %q) = %q, want x%q", tc.group, tc.name, tc.values, got, tc.want)
		}
		if n := limitkey.Len(tc.group, tc.name, tc.values...); n != len(tc.want) {
			t.Errorf("Len(%q, %q, %q) = %d, want %d", tc.group, tc.name, tc.values, n, len(tc.want))
		}
	}
}

func TestEscape_andUnescape(t *testing.T) {
	for _, tc := range []struct{ raw, escaped string }{
		{"", ""},
		{"plain", "plain"},
		{"%", "%25"},
		{"{", "%7B"},
		{"}", "%7D"},
		{":", "%3A"},
		{"a:b{c}d%e", "a%3Ab%7Bc%7Dd%25e"},
		{"%25", "%2525"},
		{"\xff:", "\xff%3A"},
	} {
		if got := limitkey.Escape(tc.raw); got != tc.escaped {
			t.Errorf("Escape(%q) = %q, want %q", tc.raw, got, tc.escaped)
		}
		if got := limitkey.EscapedLen(tc.raw); got != len(tc.escaped) {
			t.Errorf("EscapedLen(%q) = %d, want %d", tc.raw, got, len(tc.escaped))
		}
		if got := string(limitkey.AppendEscaped(nil, tc.raw)); got != tc.escaped {
			t.Errorf("AppendEscaped(%q) = %q, want %q", tc.raw, got, tc.escaped)
		}
		if got := limitkey.Unescape(tc.escaped); got != tc.raw {
			t.Errorf("Unescape(%q) = %q, want %q", tc.escaped, got, tc.raw)
		}
		if got := limitkey.GroupTag(tc.raw); got != tc.escaped {
			t.Errorf("GroupTag(%q) = %q, want %q", tc.raw, got, tc.escaped)
		}
	}
	// Only Escape's own escapes decode; any other '%' stays as it is.
	for s, want := range map[string]string{
		"%":      "%",
		"%2":     "%2",
		"a%":     "a%",
		"%41":    "%41", // a valid hex escape, but not one Escape writes
		"%3a":    "%3a", // Escape writes upper case
		"%zz%7D": "%zz}",
		"%%25":   "%%",
		"%253A":  "%3A",
	} {
		if got := limitkey.Unescape(s); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		key    string
		ok     bool
		want   limitkey.Parts
		values []string // escaped, by Value(i)
	}{
		{key: "weir:{t1}:per-user:t1:u1", ok: true, want: limitkey.Parts{Tag: "t1", Name: "per-user", Values: "t1:u1"}, values: []string{"t1", "u1"}},
		{key: "weir:{a%7Db}:l:a%7Db:x%3Ay", ok: true, want: limitkey.Parts{Tag: "a%7Db", Name: "l", Values: "a%7Db:x%3Ay"}, values: []string{"a%7Db", "x%3Ay"}},
		{key: "weir:{g}:l:", ok: true, want: limitkey.Parts{Tag: "g", Name: "l"}, values: []string{""}},
		{key: "weir:{g}:l::x", ok: true, want: limitkey.Parts{Tag: "g", Name: "l", Values: ":x"}, values: []string{"", "x"}},
		{key: "weir:{g}:l:v{x}", ok: true, want: limitkey.Parts{Tag: "g", Name: "l", Values: "v{x}"}, values: []string{"v{x}"}},
		{key: ""},
		{key: "weir:"},
		{key: "weir:{x"},
		{key: "weir:{x}"},
		{key: "weir:{x}:"},
		{key: "weir:{x}:l"},           // no value field
		{key: "weir:{x}::v"},          // no name
		{key: "weir:{}:l:v"},          // an empty tag: Redis hashes the whole key
		{key: "weir:{a}b}:l:v"},       // the tag ends at the first '}'
		{key: "weir:{a:b}:l:v"},       // a tag Escape never writes
		{key: "weir:{a{b}:l:v"},       // the same
		{key: "weir:{%41}:l:v"},       // the same
		{key: "weir:{a%}:l:v"},        // the same
		{key: "other:{x}:l:x"},        // another prefix
		{key: "Weir:{x}:l:x"},         // the prefix is case-sensitive
		{key: " weir:{x}:l:x"},        //
		{key: "rl:{tenant42}:user:7"}, // a hash tag, but not weir's shape
	} {
		p, ok := limitkey.Split(tc.key)
		if ok != tc.ok || p != tc.want {
			t.Errorf("Split(%q) = %+v, %v; want %+v, %v", tc.key, p, ok, tc.want, tc.ok)
			continue
		}
		name, ok := limitkey.LimitName(tc.key)
		if ok != tc.ok || name != tc.want.Name {
			t.Errorf("LimitName(%q) = %q, %v; want %q, %v", tc.key, name, ok, tc.want.Name, tc.ok)
		}
		if !tc.ok {
			if g, ok := limitkey.Group(tc.key); ok || g != "" {
				t.Errorf("Group(%q) = %q, %v; want not ok", tc.key, g, ok)
			}
			continue
		}
		if n := p.NumValues(); n != len(tc.values) {
			t.Errorf("Split(%q).NumValues() = %d, want %d", tc.key, n, len(tc.values))
		}
		for i, v := range tc.values {
			if got := p.Value(i); got != v {
				t.Errorf("Split(%q).Value(%d) = %q, want %q", tc.key, i, got, v)
			}
		}
		if got := p.Value(len(tc.values)); got != "" {
			t.Errorf("Split(%q).Value(%d) past the end = %q", tc.key, len(tc.values), got)
		}
	}
}

func TestGroup(t *testing.T) {
	for key, want := range map[string]string{
		"weir:{t1}:l:t1":               "t1",
		"weir:{a%7Db%7Bc}:l:a%7Db%7Bc": "a}b{c",
		"weir:{x%3Ay%25z}:l:v":         "x:y%z",
		"weir:{%253A}:l:v":             "%3A",
	} {
		if g, ok := limitkey.Group(key); !ok || g != want {
			t.Errorf("Group(%q) = %q, %v; want %q", key, g, ok, want)
		}
		if tag := limitkey.GroupTag(want); tag != limitkey.HashTag(key) {
			t.Errorf("GroupTag(%q) = %q, HashTag(%q) = %q", want, tag, key, limitkey.HashTag(key))
		}
	}
}

// The cases are Redis Cluster's rules: the first '{', the first '}' after
// it, and an empty tag means the whole key.
func TestHashTag(t *testing.T) {
	for key, want := range map[string]string{
		"rl:{tenant42}:user:7": "tenant42",
		"weir:{a%7Db}:l:v":     "a%7Db",
		"plain":                "",
		"":                     "",
		"{}x{y}":               "",
		"a{b}c{d}":             "b",
		"x{y":                  "",
		"x}{y}":                "y",
		"{{a}}":                "{a",
		"{user1000}.following": "user1000",
		"foo{}{bar}":           "",
		"foo{{bar}}zap":        "{bar",
	} {
		if got := limitkey.HashTag(key); got != want {
			t.Errorf("HashTag(%q) = %q, want %q", key, got, want)
		}
	}
}

// Policy resolves keys and owners parse them on every decision: nothing
// here may allocate beyond the key Key returns.
func TestAllocations(t *testing.T) {
	key := "weir:{acme}:per-user:acme:user-12345"
	escaped := "weir:{a%7Db}:per-user:a%7Db:u%3A1"
	buf := make([]byte, 0, 128)
	for name, tc := range map[string]struct {
		f    func()
		want float64
	}{
		"Split":           {func() { limitkey.Split(escaped) }, 0},
		"LimitName":       {func() { limitkey.LimitName(escaped) }, 0},
		"Value":           {func() { p, _ := limitkey.Split(escaped); p.Value(1) }, 0},
		"NumValues":       {func() { p, _ := limitkey.Split(escaped); p.NumValues() }, 0},
		"HashTag":         {func() { limitkey.HashTag(escaped) }, 0},
		"Group plain":     {func() { limitkey.Group(key) }, 0},
		"GroupTag plain":  {func() { limitkey.GroupTag("acme") }, 0},
		"Unescape plain":  {func() { limitkey.Unescape("acme") }, 0},
		"Append":          {func() { limitkey.Append(buf[:0], "a}b", "per-user", "a}b", "u:1") }, 0},
		"Key":             {func() { limitkey.Key("a}b", "per-user", "a}b", "u:1") }, 1},
		"Group escaped":   {func() { limitkey.Group(escaped) }, 1},
		"GroupTag escape": {func() { limitkey.GroupTag("a}b") }, 1},
	} {
		if got := testing.AllocsPerRun(100, tc.f); got != tc.want {
			t.Errorf("%s allocates %v times per call, want %v", name, got, tc.want)
		}
	}
}

// refEscape and refUnescape are the naive references the fuzz tests hold
// the codec to.
var (
	refEscape   = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D", ":", "%3A").Replace
	refUnescape = strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}", "%3A", ":").Replace
)

func refHashTag(key string) string {
	_, rest, ok := strings.Cut(key, "{")
	if !ok {
		return ""
	}
	tag, _, ok := strings.Cut(rest, "}")
	if !ok {
		return ""
	}
	return tag
}

// FuzzKey_roundTrip: for arbitrary values (':', '{', '}', '%', escapes,
// non-UTF-8), the key built from them parses back into exactly them, its
// hash tag is its group's tag, and escaping agrees with the reference.
func FuzzKey_roundTrip(f *testing.F) {
	f.Add("acme", "per-user", "acme", "u1", uint8(2))
	f.Add("a}b{c", "l", "x:y%z", "%3A", uint8(3))
	f.Add("%7D", "l", "}:{", "", uint8(1))
	f.Add("\xff\xfe", "l", "\x00%", "{}", uint8(3))
	f.Add("", "l", "v", "w", uint8(2))
	f.Fuzz(func(t *testing.T, group, name, v1, v2 string, n uint8) {
		if name == "" || strings.ContainsAny(name, "%{}:") {
			return // a policy refuses such a limit name
		}
		values := []string{group, v1, v2, v1 + v2}[:1+n%4]
		key := limitkey.Key(group, name, values...)
		if got := string(limitkey.Append(nil, group, name, values...)); got != key {
			t.Fatalf("Append = %q, Key = %q", got, key)
		}
		if n := limitkey.Len(group, name, values...); n != len(key) {
			t.Fatalf("Len = %d, len(Key) = %d", n, len(key))
		}
		for _, v := range values {
			if e := limitkey.Escape(v); e != refEscape(v) || limitkey.Unescape(e) != v || refUnescape(e) != v {
				t.Fatalf("Escape(%q) = %q, reference %q; Unescape back %q", v, e, refEscape(v), limitkey.Unescape(e))
			}
		}
		p, ok := limitkey.Split(key)
		if group == "" {
			if ok {
				t.Fatalf("Split(%q) of an empty group: ok", key)
			}
			return // Resolve never builds one: an empty value is absent
		}
		if !ok || p.Tag != limitkey.GroupTag(group) || p.Name != name || p.NumValues() != len(values) {
			t.Fatalf("Split(%q) = %+v, %v", key, p, ok)
		}
		for i, v := range values {
			if got := limitkey.Unescape(p.Value(i)); got != v {
				t.Fatalf("value %d of %q = %q, want %q", i, key, got, v)
			}
		}
		if g, ok := limitkey.Group(key); !ok || g != group {
			t.Fatalf("Group(%q) = %q, %v; want %q", key, g, ok, group)
		}
		if tag := limitkey.HashTag(key); tag != limitkey.GroupTag(group) {
			t.Fatalf("HashTag(%q) = %q, GroupTag(%q) = %q", key, tag, group, limitkey.GroupTag(group))
		}
	})
}

// FuzzSplit: any string, from any peer, parses without panicking; what
// Split accepts reassembles into the same key, and its group routes where
// Redis Cluster hashes it.
func FuzzSplit(f *testing.F) {
	f.Add("weir:{acme}:per-user:acme:u1")
	f.Add("weir:{a%7Db}:l:a%7Db:x%3Ay")
	f.Add("weir:{a}b}:l:v")
	f.Add("weir:{%41}:l:v")
	f.Add("x}{y}")
	f.Fuzz(func(t *testing.T, key string) {
		if got, want := limitkey.HashTag(key), refHashTag(key); got != want {
			t.Fatalf("HashTag(%q) = %q, reference %q", key, got, want)
		}
		limitkey.Unescape(key)
		p, ok := limitkey.Split(key)
		if !ok {
			return
		}
		if re := limitkey.Prefix + "{" + p.Tag + "}:" + p.Name + ":" + p.Values; re != key {
			t.Fatalf("Split(%q) = %+v reassembles to %q", key, p, re)
		}
		g, ok := limitkey.Group(key)
		if !ok || limitkey.GroupTag(g) != limitkey.HashTag(key) || limitkey.Escape(g) != p.Tag {
			t.Fatalf("Group(%q) = %q, %v: tag %q, HashTag %q", key, g, ok, limitkey.GroupTag(g), limitkey.HashTag(key))
		}
		for i := range p.NumValues() {
			if strings.Contains(p.Value(i), ":") {
				t.Fatalf("value %d of %q holds ':'", i, key)
			}
		}
	})
}

package envoyimport

import (
	"strconv"
	"strings"
)

const header = `# weir policy imported from envoyproxy/ratelimit configuration by
# "weir policy import-envoy". Check it with "weir policy check FILE".
#
# envoyproxy/ratelimit counts requests in fixed windows; weir decides with
# GCRA. Each limit keeps its rate (requests_per_unit per unit) and gets
# burst = requests_per_unit: a caller at rest may still send a whole
# window's quota at once, but no longer twice that across a window boundary,
# and spent quota comes back continuously instead of at the next window.
#
# Limits with a domain answer Envoy's rate limit service (ShouldRateLimit)
# only; match lists a descriptor's entry keys in order and values pins keys
# to one value, like "value:" in the original configuration.
`

// emit writes the policy for ls, converted from files.
func emit(ls []*limit, files []File) []byte {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("#\n# Converted from:")
	for _, f := range files {
		b.WriteString(" " + comment(f.Name))
	}
	b.WriteString("\n\ndefaults:\n  on_failure: open # as Envoy's filter without failure_mode_deny\n\nlimits:\n")
	for _, l := range ls {
		emitLimit(&b, l)
	}
	return []byte(b.String())
}

func emitLimit(b *strings.Builder, l *limit) {
	b.WriteString("  # " + comment(l.origin) + "\n")
	b.WriteString("  - name: " + strconv.Quote(l.name) + "\n")
	b.WriteString("    domain: " + strconv.Quote(l.domain) + "\n")
	b.WriteString("    match: [" + quoteList(l.match) + "]\n")
	if l.group != "" && l.group != l.match[0] {
		b.WriteString("    group: " + strconv.Quote(l.group) + "\n")
	}
	if keys := l.sortedValues(); len(keys) > 0 {
		b.WriteString("    values: {")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(k) + ": " + strconv.Quote(l.values[k]))
		}
		b.WriteString("}\n")
	}
	if l.unlimited {
		b.WriteString("    unlimited: true\n")
	} else {
		b.WriteString("    rate: " + l.rate + "\n")
		b.WriteString("    burst: " + strconv.FormatInt(l.burst, 10) + "\n")
	}
	if l.shadow {
		b.WriteString("    shadow: true\n")
	}
	if len(l.replaces) > 0 {
		b.WriteString("    replaces: [" + quoteList(l.replaces) + "]\n")
	}
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// comment makes s safe on one comment line.
func comment(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

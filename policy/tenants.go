package policy

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"
)

// fileTenants is the tenants mapping. It decodes itself because yaml.v3
// checks a mapping for duplicate keys by comparing every pair, which made a
// policy of 100,000 tenants take about a minute to load; here duplicates
// are found with a map, so loading is linear in the number of tenants. The
// messages keep yaml.v3's wording, and unknown fields inside a tenant are
// refused as the decoder's KnownFields would.
type fileTenants map[string]fileTenant

// UnmarshalYAML decodes a mapping of tenant names to tenants.
func (ts *fileTenants) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s into tenants (a mapping)", n.Line, n.ShortTag())}}
	}
	out := make(fileTenants, len(n.Content)/2)
	lines := make(map[string]int, len(n.Content)/2)
	var errs []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Sprintf("line %d: a tenant name must be a string", k.Line))
			continue
		}
		if at, dup := lines[k.Value]; dup {
			errs = append(errs, fmt.Sprintf("line %d: mapping key %q already defined at line %d", k.Line, k.Value, at))
			continue
		}
		lines[k.Value] = k.Line
		if msgs := unknownFields(v, "policy.fileTenant", "tier", "overrides"); len(msgs) > 0 {
			errs = append(errs, msgs...)
			continue
		}
		var t fileTenant
		if err := v.Decode(&t); err != nil {
			errs = append(errs, yamlMessages(err)...)
			continue
		}
		out[k.Value] = t
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	*ts = out
	return nil
}

// unknownFields lists the keys of mapping n that are not in known, and
// those of its overrides entries that a fileAdjust does not have, in
// yaml.v3's words. Node.Decode cannot refuse unknown fields itself.
func unknownFields(n *yaml.Node, typ string, known ...string) []string {
	if n.Kind != yaml.MappingNode {
		return nil // Decode reports the wrong kind
	}
	var msgs []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(known, k.Value) {
			msgs = append(msgs, fmt.Sprintf("line %d: field %s not found in type %s", k.Line, k.Value, typ))
			continue
		}
		if k.Value == "overrides" && v.Kind == yaml.MappingNode {
			for j := 1; j < len(v.Content); j += 2 {
				msgs = append(msgs, unknownFields(v.Content[j], "policy.fileAdjust", "rate", "burst", "shadow", "max_in_flight")...)
			}
		}
	}
	return msgs
}

// yamlMessages returns the messages of a decoding error.
func yamlMessages(err error) []string {
	if te, ok := err.(*yaml.TypeError); ok {
		return te.Errors
	}
	return []string{err.Error()}
}

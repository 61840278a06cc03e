package envoyimport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/weirhq/weir/policy"
)

// File is one envoyproxy/ratelimit configuration file.
type File struct {
	Name string // for messages
	Data []byte
}

// Kind says how a Note affected the policy.
type Kind string

const (
	// Changed: mapped, with a difference the operator should know.
	Changed Kind = "changed"
	// Ignored: a setting weir has no use for; decisions are unaffected.
	Ignored Kind = "ignored"
	// Unmapped: left out of the policy; requests it would have limited
	// are not limited by it.
	Unmapped Kind = "unmapped"
)

// Note is one remark about the conversion.
type Note struct {
	Kind Kind
	// Where names the file and the descriptor path, e.g.
	// "config.yaml: mongo_cps/database=users".
	Where   string
	Message string
}

func (n Note) String() string { return fmt.Sprintf("%s: %s: %s", n.Kind, n.Where, n.Message) }

// Result is a conversion's outcome.
type Result struct {
	// Policy is the weir policy, a YAML document that policy.Parse accepts.
	Policy []byte
	// Limits is how many limits Policy holds.
	Limits int
	Notes  []Note
}

// Unmapped reports whether some part of the input was left out.
func (r *Result) Unmapped() bool {
	return slices.ContainsFunc(r.Notes, func(n Note) bool { return n.Kind == Unmapped })
}

// The envoyproxy/ratelimit file shape.
type (
	config struct {
		Domain      string       `yaml:"domain"`
		Descriptors []descriptor `yaml:"descriptors"`
	}
	descriptor struct {
		Key            string       `yaml:"key"`
		Value          string       `yaml:"value"`
		RateLimit      *rateLimit   `yaml:"rate_limit"`
		ShadowMode     bool         `yaml:"shadow_mode"`
		DetailedMetric bool         `yaml:"detailed_metric"`
		ValueToMetric  bool         `yaml:"value_to_metric"`
		Descriptors    []descriptor `yaml:"descriptors"`
	}
	rateLimit struct {
		Name            string    `yaml:"name"`
		Replaces        []replace `yaml:"replaces"`
		Unit            string    `yaml:"unit"`
		RequestsPerUnit int64     `yaml:"requests_per_unit"`
		Unlimited       bool      `yaml:"unlimited"`
	}
	replace struct {
		Name string `yaml:"name"`
	}
)

// limit is one weir limit being built.
type limit struct {
	name, domain, rate, group string
	burst                     int64
	match                     []string
	values                    map[string]string
	shadow, unlimited         bool
	replaces                  []string // envoy names until resolved
	origin                    string   // "domain/key=value/key" for comments
	where                     string   // "file: " and origin, for notes
}

// Convert converts files (one domain each, as envoyproxy/ratelimit loads
// them) into one policy. Malformed input (YAML errors, unknown fields, a
// file without a domain, a domain in two files, a descriptor without a key
// or a rate_limit without a unit) is an error and nothing is returned; what
// is well-formed but cannot be mapped is left out and noted.
func Convert(files []File) (*Result, error) {
	c := &converter{names: map[string]bool{}, envoyNames: map[string]map[string]string{}}
	domains := map[string]string{}
	for _, f := range files {
		cfg, err := decode(f)
		if err != nil {
			return nil, err
		}
		if prev, dup := domains[cfg.Domain]; dup {
			return nil, fmt.Errorf("envoyimport: %s: domain %q is also in %s", f.Name, cfg.Domain, prev)
		}
		domains[cfg.Domain] = f.Name
		if err := c.walk(f.Name, cfg.Domain, nil, nil, cfg.Descriptors); err != nil {
			return nil, err
		}
	}
	if len(c.limits) == 0 {
		return nil, errors.New("envoyimport: no limit could be mapped: " + notesText(c.notes))
	}
	c.resolveReplaces()
	out := emit(c.limits, files)
	if _, err := policy.Parse("imported policy", out); err != nil {
		return nil, fmt.Errorf("envoyimport: the converted policy does not load (a bug in the importer): %w", err)
	}
	return &Result{Policy: out, Limits: len(c.limits), Notes: c.notes}, nil
}

func notesText(ns []Note) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = n.String()
	}
	return strings.Join(s, "; ")
}

func decode(f File) (*config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(f.Data))
	dec.KnownFields(true)
	var cfg config
	if err := dec.Decode(&cfg); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("envoyimport: %s: the file is empty", f.Name)
		}
		return nil, fmt.Errorf("envoyimport: %s: %w", f.Name, err)
	}
	if cfg.Domain == "" {
		return nil, fmt.Errorf("envoyimport: %s: no domain", f.Name)
	}
	return &cfg, nil
}

type converter struct {
	limits     []*limit
	notes      []Note
	names      map[string]bool              // weir names in use
	envoyNames map[string]map[string]string // domain -> rate_limit.name -> weir name
}

func (c *converter) note(k Kind, where, format string, args ...any) {
	c.notes = append(c.notes, Note{Kind: k, Where: where, Message: fmt.Sprintf(format, args...)})
}

// walk converts ds, the children of the node at keys/vals.
func (c *converter) walk(file, domain string, keys, vals []string, ds []descriptor) error {
	for i := range ds {
		d := &ds[i]
		if d.Key == "" {
			return fmt.Errorf("envoyimport: %s: %s: a descriptor has no key", file, path(domain, keys, vals))
		}
		k, v := append(slices.Clone(keys), d.Key), append(slices.Clone(vals), d.Value)
		where := file + ": " + path(domain, k, v)
		switch {
		case strings.HasSuffix(d.Value, "*"):
			c.note(Unmapped, where, "wildcard values are not supported; this node and everything below it are left out")
			continue
		case slices.Contains(keys, d.Key):
			c.note(Unmapped, where, "key %q appears twice on one path; a weir limit matches each key once, so this node and everything below it are left out", d.Key)
			continue
		}
		if d.DetailedMetric || d.ValueToMetric {
			c.note(Ignored, where, "detailed_metric and value_to_metric: weir never labels metrics by descriptor value (unbounded cardinality); its metrics are per limit")
		}
		if d.RateLimit != nil {
			if err := c.add(where, domain, k, v, d); err != nil {
				return fmt.Errorf("envoyimport: %s: %w", where, err)
			}
		} else if d.ShadowMode {
			c.note(Ignored, where, "shadow_mode without a rate_limit has nothing to apply to")
		}
		if err := c.walk(file, domain, k, v, d.Descriptors); err != nil {
			return err
		}
	}
	return nil
}

// path writes a node's place: domain/key=value/key...
func path(domain string, keys, vals []string) string {
	var b strings.Builder
	b.WriteString(domain)
	for i, k := range keys {
		b.WriteString("/" + k)
		if vals[i] != "" {
			b.WriteString("=" + vals[i])
		}
	}
	return b.String()
}

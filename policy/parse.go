package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileBytes bounds a policy file. Larger input is refused unread.
const MaxFileBytes = 16 << 20

// maxErrors bounds how many problems one error reports.
const maxErrors = 20

// The file's shape. Every field is optional to the decoder; build checks
// what is required. Pointers mark fields whose absence matters.
type (
	filePolicy struct {
		Version            string                           `yaml:"version"`
		UnknownDescriptors string                           `yaml:"unknown_descriptors"`
		TenantDescriptor   string                           `yaml:"tenant_descriptor"`
		DefaultTier        string                           `yaml:"default_tier"`
		Defaults           fileDefaults                     `yaml:"defaults"`
		Tiers              map[string]map[string]fileAdjust `yaml:"tiers"`
		Tenants            fileTenants                      `yaml:"tenants"`
		Limits             []fileLimit                      `yaml:"limits"`
	}
	fileDefaults struct {
		Consistency string `yaml:"consistency"`
		OnFailure   string `yaml:"on_failure"`
		Scope       string `yaml:"scope"`
	}
	fileLimit struct {
		Name          string     `yaml:"name"`
		Match         []string   `yaml:"match"`
		Group         string     `yaml:"group"`
		Rate          string     `yaml:"rate"`
		Burst         int64      `yaml:"burst"`
		Shadow        bool       `yaml:"shadow"`
		Consistency   string     `yaml:"consistency"`
		OnFailure     string     `yaml:"on_failure"`
		FallbackRate  string     `yaml:"fallback_rate"`
		FallbackBurst int64      `yaml:"fallback_burst"`
		Leasable      *bool      `yaml:"leasable"` // replaced by Lease: refused with a message
		Lease         *fileLease `yaml:"lease"`
		Scope         string     `yaml:"scope"`
		fileEnvoy     `yaml:",inline"`

		// kind, max_in_flight, ttl, reserve_ttl: concurrency.go
		fileConcurrency `yaml:",inline"`
	}
	// fileAdjust is a tier's or an override's change to one limit.
	fileAdjust struct {
		Rate   *string `yaml:"rate"`
		Burst  *int64  `yaml:"burst"`
		Shadow *bool   `yaml:"shadow"`

		// MaxInFlight adjusts a concurrency limit (applyPermitAdjust).
		MaxInFlight *int64 `yaml:"max_in_flight"`
	}
	fileTenant struct {
		Tier      string                `yaml:"tier"`
		Overrides map[string]fileAdjust `yaml:"overrides"`
	}
)

// invalidError is a policy error. Its message is only the problems, so that
// logs stay readable; errors.Is(err, ErrInvalid) still holds.
type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// checker collects problems, each "path: message".
type checker struct {
	source string // the input's name, for messages that give a line
	errs   []string
}

func (c *checker) addf(path, format string, args ...any) {
	c.errs = append(c.errs, path+": "+fmt.Sprintf(format, args...))
}

// err returns nil or one error listing every problem, one a line, each
// prefixed with source.
func (c *checker) err(source string) error {
	if len(c.errs) == 0 {
		return nil
	}
	lines := c.errs
	if len(lines) > maxErrors {
		lines = append(lines[:maxErrors:maxErrors], fmt.Sprintf("and %d more problems", len(c.errs)-maxErrors))
	}
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(source + ": " + l)
	}
	return &invalidError{msg: b.String()}
}

// Parse decodes and validates a policy. source names the input in messages
// (usually the file name). A policy with any problem is refused whole: the
// error wraps ErrInvalid and lists up to 20 problems, one a line, each naming
// source, the place (e.g. `limits[2] "per-user"`) and the field. Parse
// changes nothing outside the returned Policy.
func Parse(source string, data []byte) (*Policy, error) {
	return parse(source, data, sha256.Sum256(data))
}

func parse(source string, data []byte, digest [32]byte) (*Policy, error) {
	if len(data) > MaxFileBytes {
		return nil, &invalidError{msg: fmt.Sprintf("%s: larger than %d bytes", source, MaxFileBytes)}
	}
	fp, err := decode(data)
	if err != nil {
		return nil, &invalidError{msg: source + ": " + err.Error()}
	}
	c := checker{source: source}
	p := build(&c, fp)
	if err := c.err(source); err != nil {
		return nil, err
	}
	p.indexParams()
	p.buildDefs()
	p.leases = slices.ContainsFunc(p.Limits, func(l *Limit) bool { return l.Lease != nil })
	p.Source = source
	p.digest = digest
	if p.Version == "" {
		p.Version = "sha256:" + hex.EncodeToString(digest[:])[:12]
	}
	return p, nil
}

// LoadFile reads and parses the policy file at path; messages name path.
func LoadFile(path string) (*Policy, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("policy: read %s: %w", path, err)
	}
	return data, nil
}

// typeNames rewrites the Go types yaml.v3 names in its messages, which mean
// nothing to a policy author. Longer names come first: the first match wins.
var typeNames = strings.NewReplacer(
	" in type policy.filePolicy", " at the top level",
	" in type policy.fileLimit", " in a limit",
	" in type policy.fileAdjust", " in a tier or override entry",
	" in type policy.fileTenant", " in a tenant",
	" in type policy.fileDefaults", " in defaults",
	"[]policy.fileLimit", "a list of limits",
	"map[string]map[string]policy.fileAdjust", "tiers (a mapping of mappings)",
	"map[string]policy.fileAdjust", "a mapping of limit names",
	"map[string]policy.fileTenant", "tenants (a mapping)",
	"policy.filePolicy", "a policy (a mapping)",
	"policy.fileLimit", "a limit (a mapping)",
	"policy.fileAdjust", "a tier or override entry (a mapping)",
	"policy.fileTenant", "a tenant (a mapping)",
	"policy.fileDefaults", "defaults (a mapping)",
)

// decode reads exactly one YAML document, refusing unknown fields.
func decode(data []byte) (*filePolicy, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var fp filePolicy
	if err := dec.Decode(&fp); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the file is empty")
		}
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one YAML document")
	}
	return &fp, nil
}

func yamlError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			msgs[i] = typeNames.Replace(m)
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

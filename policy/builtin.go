package policy

import (
	_ "embed"
	"fmt"
	"slices"
)

//go:embed builtin.yaml
var builtinYAML []byte

// BuiltinYAML returns the source of Builtin's policy. The slice is the
// caller's.
func BuiltinYAML() []byte { return slices.Clone(builtinYAML) }

// Builtin returns the example policy a node enforces when it is given no
// policy file: per-user (5/s, burst 3, on tenant and user, grouped by
// tenant), per-tenant (100/s, burst 50, local fallback, leasable) and
// per-route-shadow (20/s, burst 10, shadow), with a "pro" tier for tenant
// "acme". Each call parses afresh and returns a new Policy.
func Builtin() *Policy {
	p, err := Parse("builtin.yaml", builtinYAML)
	if err != nil {
		panic(fmt.Sprintf("policy: the embedded builtin.yaml is invalid: %v", err)) // caught by TestBuiltin
	}
	return p
}

package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/weirhq/weir/policy"
)

const policyUsage = `Usage: weir policy check FILE
       weir policy import-envoy CONFIG.yaml... > policy.yaml

Validates the policy file FILE as a node would load it. Prints its version
and limits and exits 0, or prints the problem and exits 1.

import-envoy converts envoyproxy/ratelimit configuration files into a weir
policy (see "weir policy import-envoy -h").
`

func runPolicy(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && isHelp(args[0]) || len(args) == 2 && args[0] == "check" && isHelp(args[1]) {
		fmt.Fprint(stdout, policyUsage)
		return exitOK
	}
	if len(args) > 0 && args[0] == "import-envoy" {
		return runImportEnvoy(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintf(stderr, "weir policy: want the subcommand check\n\n%s", policyUsage)
		return exitError
	}
	if len(args) != 2 {
		fmt.Fprintf(stderr, "weir policy check: want exactly one FILE, got %d arguments\n\n%s", len(args)-1, policyUsage)
		return exitError
	}
	p, err := policy.LoadFile(args[1])
	if err != nil {
		fmt.Fprintf(stderr, "weir policy check: %v\n", err)
		return exitNo
	}
	io.WriteString(stdout, formatPolicy(p))
	return exitOK
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// formatPolicy prints a summary line and one line per limit.
func formatPolicy(p *policy.Policy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ok: version %s, %d limits\n", p.Version, len(p.Limits))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, l := range p.Limits {
		mode := "enforced"
		if l.Shadow {
			mode = "shadow"
		}
		line := fmt.Sprintf("  %s\t%s\tburst %d\t%s", l.Name, l.Rate.String(), l.Burst, mode)
		if l.Envoy.Unlimited {
			line = fmt.Sprintf("  %s\tunlimited\t\t", l.Name)
		}
		if l.Envoy.Domain != "" {
			line += "\tenvoy domain " + l.Envoy.Domain
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	return b.String()
}

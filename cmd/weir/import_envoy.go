package main

import (
	"fmt"
	"io"
	"os"

	"github.com/weirhq/weir/envoyimport"
	"github.com/weirhq/weir/policy"
)

const importEnvoyUsage = `Usage: weir policy import-envoy CONFIG.yaml... > policy.yaml

Converts envoyproxy/ratelimit configuration files (one domain each) into one
weir policy, written to standard output. A report of what was changed,
ignored or could not be mapped, and why, goes to standard error.

Fixed windows become GCRA with the same rate and burst = requests_per_unit.

Exit status: 0 when everything was mapped, 1 when the policy was written but
something was left out (see the report), 2 when no policy could be made.
`

func runImportEnvoy(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && isHelp(args[0]) {
		fmt.Fprint(stdout, importEnvoyUsage)
		return exitOK
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, "weir policy import-envoy: want at least one CONFIG file\n\n%s", importEnvoyUsage)
		return exitError
	}
	files := make([]envoyimport.File, len(args))
	for i, name := range args {
		data, err := readLimited(name)
		if err != nil {
			fmt.Fprintf(stderr, "weir policy import-envoy: %v\n", err)
			return exitError
		}
		files[i] = envoyimport.File{Name: name, Data: data}
	}
	res, err := envoyimport.Convert(files)
	if err != nil {
		fmt.Fprintf(stderr, "weir policy import-envoy: %v\n", err)
		return exitError
	}
	if _, err := stdout.Write(res.Policy); err != nil {
		fmt.Fprintf(stderr, "weir policy import-envoy: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stderr, "imported %d limits from %d files; fixed windows became GCRA with the same rate and burst = requests_per_unit\n", res.Limits, len(files))
	for _, n := range res.Notes {
		fmt.Fprintln(stderr, n)
	}
	if res.Unmapped() {
		return exitNo
	}
	return exitOK
}

// readLimited reads a config file of at most policy.MaxFileBytes.
func readLimited(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, policy.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > policy.MaxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, policy.MaxFileBytes)
	}
	return data, nil
}

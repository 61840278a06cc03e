package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/weirhq/weir/client"
)

// descFlag collects repeated NAME=VALUE flags into descriptors. Values
// given on the command line replace the defaults it was created with.
type descFlag struct {
	m       map[string]string
	changed bool
}

func newDescFlag(defaults map[string]string) *descFlag {
	return &descFlag{m: maps.Clone(defaults)}
}

func (d *descFlag) String() string {
	if d == nil {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d.m)) {
		parts = append(parts, k+"="+d.m[k])
	}
	return strings.Join(parts, ",")
}

func (d *descFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", s)
	}
	if !d.changed {
		d.m, d.changed = map[string]string{}, true
	}
	if _, dup := d.m[name]; dup {
		return fmt.Errorf("descriptor %q given twice", name)
	}
	d.m[name] = value
	return nil
}

// newFlagSet returns a flag set for "weir name" that reports errors to
// stderr and lets parse return them.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("weir "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: weir %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs and rejects positional arguments. It
// returns the exit code to use and false when the command must stop: 0
// after -h, 2 after a usage error (already reported on stderr).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitError, false // flag has printed the error and usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitError, false
	}
	return exitOK, true
}

// usageError reports a flag value problem found after parsing.
func usageError(fs *flag.FlagSet, stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "%s: %v\nRun '%s -h' for usage.\n", fs.Name(), err, fs.Name())
	return exitError
}

// tlsFlags are the TLS options of the commands that dial a node, over gRPC
// (decide, bench) or HTTPS (status, shadow, inspect).
type tlsFlags struct {
	on  bool
	cfg client.TLSConfig
}

func addTLSFlags(fs *flag.FlagSet) *tlsFlags {
	f := &tlsFlags{}
	fs.BoolVar(&f.on, "tls", false, "connect over TLS, verifying the node against the system roots (implied by the other --tls-* flags)")
	fs.StringVar(&f.cfg.CAFile, "tls-ca", "", "PEM CA bundle to verify the node's certificate against")
	fs.StringVar(&f.cfg.CertFile, "tls-cert", "", "PEM client certificate, for a node that requires one (public listeners with --tls-client-ca; admin listeners with --peer-tls-*, a certificate from the cluster CA)")
	fs.StringVar(&f.cfg.KeyFile, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.cfg.ServerName, "tls-server-name", "", "name the node's certificate must carry (default: the host of --addr)")
	return f
}

// config returns the TLS configuration, nil for plaintext when no TLS flag
// was given.
func (f *tlsFlags) config() *client.TLSConfig {
	if !f.on && f.cfg == (client.TLSConfig{}) {
		return nil
	}
	c := f.cfg
	return &c
}

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

// run starts a node and serves until SIGTERM or SIGINT. It returns the exit
// code: 0 after a clean shutdown, 1 on a runtime failure, 2 on bad flags.
// With --check it only validates (check.go): 0 valid, 1 a file or the
// policy does not load, 2 bad flags.
func run(args []string, getenv func(string) string, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "node:", err)
		return 2
	}
	if cfg.Check {
		if err := check(cfg, systemHostAddrs(), stderr); err != nil {
			fmt.Fprintln(stderr, "node: check failed:", err)
			return 1
		}
		return 0
	}
	logger, err := newLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "node:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	n, err := start(ctx, cfg, logger)
	if err != nil {
		logger.Error("node failed to start", "err", err)
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reloads := startReloader(func() { n.reloadPolicy(); n.reloadGossipKeys(cfg); n.reloadRedisPassword(cfg) }) // off this loop: SIGTERM must never wait for a reload
	defer reloads.stop()
	for {
		select {
		case <-hup:
			reloads.request()
		case err := <-n.failed:
			logger.Error("node failed", "err", err)
			n.shutdown(context.Background(), cfg.ShutdownTimeout)
			return 1
		case <-ctx.Done():
			logger.Info("shutting down")
			n.shutdown(context.Background(), cfg.ShutdownTimeout)
			return 0
		}
	}
}

func newLogger(cfg config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", cfg.LogLevel, err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

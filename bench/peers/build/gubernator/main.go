// Command gubernator is gubernator v2.13.0's daemon as its own
// cmd/gubernator starts it (gubernator.SetupDaemonConfig from GUBER_*
// variables, then gubernator.SpawnDaemon), with one change: the memberlist
// node is named after GUBER_INSTANCE_ID. v2.13.0 reads no variable for that
// name and memberlist then uses the host name, so several daemons on one
// host reject each other as duplicates and each stays a cluster of one.
// (v2.13.0 also keys its peers by IP: the bench gives each daemon its own
// loopback address.)
// Tracing is not set up (there is no collector on the bench machine).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	gubernator "github.com/gubernator-io/gubernator/v2"
	"github.com/sirupsen/logrus"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gubernator:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	conf, err := gubernator.SetupDaemonConfig(logrus.StandardLogger(), nil)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	conf.MemberListPoolConf.NodeName = conf.InstanceID
	daemon, err := gubernator.SpawnDaemon(ctx, conf)
	if err != nil {
		return fmt.Errorf("spawn: %w", err)
	}
	<-ctx.Done()
	daemon.Close()
	return nil
}

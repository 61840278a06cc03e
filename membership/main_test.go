package membership

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// leakGrace is how long goroutines may take to end after the tests. Shutdown
// stops every goroutine of this package and memberlist's listeners and
// tickers, but memberlist does not wait for a probe in flight
// (Memberlist.probeNode): it ends at its ack timeout, within one probe
// interval (1s in the local profile). goleak's own retries give up sooner
// under load, so keep asking until the grace period ends rather than
// ignoring probeNode.
const leakGrace = 5 * time.Second

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := findLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func findLeaks() error {
	deadline := time.Now().Add(leakGrace)
	for {
		err := goleak.Find()
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

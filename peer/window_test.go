package peer

import (
	"context"
	"testing"

	"github.com/weirhq/weir/grpclimit/grpclimittest"
)

// TestClient_Decide_sendsNoBDPPings forwards 300 decisions one by one
// through a relay that parses what the Client sends, and checks that the
// Client sent no PING of its own. With gRPC's dynamic windows the receiver
// of data pings after it whenever no ping is outstanding (its estimate of
// the link's bandwidth-delay product), so a forwarding stream would pay a
// PING and its ACK for almost every answer.
func TestClient_Decide_sendsNoBDPPings(t *testing.T) {
	var frames grpclimittest.Frames
	addr := grpclimittest.CountingRelay(t, startServer(t, &fakeHandler{}), &frames)
	c, _ := newClient(t, nil)
	for i := range 300 {
		if _, err := c.Decide(context.Background(), addr, item(int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if frames.Data.Load() == 0 {
		t.Fatal("the relay parsed no DATA frame: it is not seeing the Client's stream")
	}
	if n := frames.Pings.Load(); n != 0 {
		t.Errorf("the Client sent %d PINGs with %d DATA frames over 300 forwards, want none", n, frames.Data.Load())
	}
}

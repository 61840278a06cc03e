package peer

import (
	"errors"
	"fmt"

	"google.golang.org/grpc"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	regionv1 "github.com/weirhq/weir/api/weir/region/v1"
)

// peerConn is one gRPC connection to a peer with the stubs of every
// node-to-node service on it: Decide and Lease (weir.peer.v1) and Report
// (weir.region.v1) share it, with the Client's credentials and dial
// options.
//
// A peerQueue holds one current connection. redial replaces it, for a
// connection that looks stalled; the old one is retired, not closed under
// the RPCs still running on it: the last of them to end closes it (users
// counts them under the peerQueue's mutex).
type peerConn struct {
	conn    *grpc.ClientConn
	peer    peerv1.PeerClient
	region  regionv1.RegionClient
	users   int  // RPCs in flight on conn
	retired bool // replaced by redial: close once users reaches 0
}

// dial makes a connection to addr; grpc.NewClient connects lazily, so it
// fails only for an address it cannot parse.
func dial(addr string, opts []grpc.DialOption) (*peerConn, error) {
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("peer: dial %q: %w", addr, err)
	}
	return &peerConn{conn: conn, peer: peerv1.NewPeerClient(conn), region: regionv1.NewRegionClient(conn)}, nil
}

// acquire returns the current connection for one RPC, or the close reason
// once the queue is closed. Pair it with release.
func (p *peerQueue) acquire() (*peerConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.mu.closeErr; err != nil {
		return nil, err
	}
	p.mu.conn.users++
	return p.mu.conn, nil
}

// release ends one RPC on pc, closing pc if it was retired and this was
// its last.
func (p *peerQueue) release(pc *peerConn) {
	p.mu.Lock()
	pc.users--
	last := pc.retired && pc.users == 0
	if last {
		delete(p.mu.retired, pc)
	}
	p.mu.Unlock()
	if last {
		pc.conn.Close() // nothing runs on it any more; its error says nothing
	}
}

// redial replaces pc, if it is still the current connection, with a fresh
// one that later RPCs use. After a cut heals, a connection whose packets
// were dropped can stall for many seconds of TCP retransmission backoff;
// a new one gets through at once. RPCs already running on pc go on until
// they end, so a redial never fails a healthy forward; a DecideStream on pc
// is retired (closed for sending) and ends once its batches are answered.
func (p *peerQueue) redial(pc *peerConn) {
	p.mu.Lock()
	if p.mu.closeErr != nil || p.mu.conn != pc {
		p.mu.Unlock()
		return // closed, or another call redialled first
	}
	next, err := dial(p.addr, p.dialOpts)
	if err != nil { // the address parsed once; keep the old connection
		p.mu.Unlock()
		return
	}
	p.metrics.redials.Inc()
	p.mu.conn = next
	pc.retired = true
	idle := pc.users == 0
	if !idle {
		p.mu.retired[pc] = struct{}{}
	}
	s := p.mu.stream
	p.mu.Unlock()
	if idle {
		pc.conn.Close() // nothing runs on it; its error says nothing
	}
	if s != nil && s.pc == pc {
		s.retire() // it ends once the peer answered the batches it holds
	}
}

// takeConnsLocked returns the current connection and every retired one,
// for close to close (which cancels the RPCs on them).
func (p *peerQueue) takeConnsLocked() []*peerConn {
	conns := []*peerConn{p.mu.conn}
	for pc := range p.mu.retired {
		conns = append(conns, pc)
		delete(p.mu.retired, pc)
	}
	return conns
}

func closeConns(conns []*peerConn) error {
	var errs []error
	for _, pc := range conns {
		errs = append(errs, pc.conn.Close())
	}
	return errors.Join(errs...)
}

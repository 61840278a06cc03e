package dnstest

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a DNS server on a UDP socket and a TCP listener of the same
// address. Its methods are safe for concurrent use.
type Server struct {
	udp net.PacketConn
	tcp net.Listener

	mu      sync.Mutex
	names   map[string]netip.Addr // lower-case name, no trailing dot
	delay   time.Duration
	held    bool
	drop    bool
	waiting []func() // answers held while held is true
	queries int
	closed  bool
	conns   map[net.Conn]bool // open TCP connections
	wg      sync.WaitGroup
}

// Start serves DNS on addr (host:port; port 0 picks one) until the test
// ends.
func Start(t testing.TB, addr string) *Server {
	t.Helper()
	s := &Server{names: map[string]netip.Addr{}, conns: map[net.Conn]bool{}}
	var err error
	for range 10 { // port 0: the UDP port picked may be taken for TCP
		if s.udp, err = net.ListenPacket("udp", addr); err != nil {
			break
		}
		if s.tcp, err = net.Listen("tcp", s.udp.LocalAddr().String()); err == nil {
			break
		}
		s.udp.Close()
		s.udp = nil
	}
	if err != nil {
		t.Fatalf("dnstest: %v", err)
	}
	s.wg.Add(2)
	go s.serveUDP()
	go s.serveTCP()
	t.Cleanup(s.Close)
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.udp.LocalAddr().String() }

// Dial is a net.Resolver's Dial that sends every query to s over TCP, so
// that Close ends a query it holds at once (a UDP query would wait out the
// resolver's timeout). Name Addr in a resolv.conf to be asked over UDP.
func (s *Server) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", s.Addr())
}

// Set makes name resolve to ip.
func (s *Server) Set(name string, ip netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names[strings.ToLower(strings.TrimSuffix(name, "."))] = ip
}

// Delete makes name unknown (NXDOMAIN) from now on.
func (s *Server) Delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.names, strings.ToLower(strings.TrimSuffix(name, ".")))
}

// SetDelay delays every answer by d from now on.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Hold keeps every query from now on unanswered until Release.
func (s *Server) Hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = true
}

// Drop(true) leaves every query from now on unanswered for good (a lost
// packet, an upstream that never replies) until Drop(false); the resolver
// waits out its timeout on each.
func (s *Server) Drop(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop = on
}

// Release answers the queries held since Hold, and the next ones as they
// come.
func (s *Server) Release() {
	s.mu.Lock()
	s.held = false
	w := s.waiting
	s.waiting = nil
	s.mu.Unlock()
	for _, send := range w {
		send()
	}
}

// Queries is how many queries s has read.
func (s *Server) Queries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries
}

// Close answers what is held and stops the server; its TCP connections
// close, so queries on them end at once.
func (s *Server) Close() {
	s.Release()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.udp.Close()
	s.tcp.Close()
	s.wg.Wait()
}

func (s *Server) serveUDP() {
	defer s.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := s.udp.ReadFrom(buf)
		if err != nil {
			return
		}
		s.handle(buf[:n], func(a []byte) { s.udp.WriteTo(a, from) })
	}
}

func (s *Server) serveTCP() {
	defer s.wg.Done()
	for {
		c, err := s.tcp.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

// serveConn answers the length-prefixed queries of one TCP connection
// (RFC 1035, section 4.2.2).
func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	var wmu sync.Mutex
	for {
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		s.handle(q, func(a []byte) {
			wmu.Lock()
			defer wmu.Unlock()
			c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(a))))
			c.Write(a)
		})
	}
}

// handle answers query q through send: at once, after the delay, or on
// Release.
func (s *Server) handle(q []byte, send func(answer []byte)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries++
	a, err := answer(q, s.names)
	if err != nil || s.closed || s.drop {
		return
	}
	reply := func() { send(a) }
	if s.held {
		s.waiting = append(s.waiting, reply)
		return
	}
	d := s.delay
	s.wg.Add(1)
	go func() { // never write under s.mu
		defer s.wg.Done()
		time.Sleep(d)
		reply()
	}()
}

// answer builds the response to the one-question query q (RFC 1035,
// section 4.1): an A record for a known name, no record for any other
// type of it, NXDOMAIN for a name not known.
func answer(q []byte, names map[string]netip.Addr) ([]byte, error) {
	if len(q) < 12 || q[2]&0x80 != 0 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil, errors.New("dnstest: not a one-question query")
	}
	var labels []string
	i := 12
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if l > 63 || i+1+l > len(q) {
			return nil, errors.New("dnstest: bad label")
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil, errors.New("dnstest: short question")
	}
	qend := i + 5 // the root label, QTYPE, QCLASS
	qtype := binary.BigEndian.Uint16(q[i+1:])
	ip, known := names[strings.ToLower(strings.Join(labels, "."))]
	a := append([]byte(nil), q[:qend]...)
	flags := uint16(0x8000|0x0400|0x0080) | binary.BigEndian.Uint16(q[2:])&0x0100 // QR, AA, RA; RD as asked
	if !known {
		flags |= 3 // NXDOMAIN
	}
	binary.BigEndian.PutUint16(a[2:], flags)
	clear(a[6:12]) // no answer, authority or additional records (the query's EDNS record is not echoed)
	if known && qtype == 1 && ip.Is4() {
		binary.BigEndian.PutUint16(a[6:], 1)
		a = append(a, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4) // the name at offset 12, A, IN, TTL 5 s, 4 bytes
		a = append(a, ip.AsSlice()...)
	}
	return a, nil
}

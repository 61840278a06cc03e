package grpclimittest

import (
	"bufio"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
)

// Frames counts what an HTTP/2 client sends: its DATA frames, and its
// PING frames that are not ACKs.
type Frames struct {
	Data, Pings atomic.Int64
}

// CountingRelay listens on 127.0.0.1 at a free port and relays every
// connection to target, parsing the bytes each client sends (preface, then
// frames) into frames. Relaying stops and its goroutines have ended when
// the test ends. It returns the relay's address.
func CountingRelay(t testing.TB, target string, frames *Frames) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(wg.Wait) // cleanups run last first: this one after the closes below
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(in, out) })
			wg.Go(func() { frames.count(io.TeeReader(in, out)) })
		}
	})
	return ln.Addr().String()
}

// count parses r until it ends or fails.
func (f *Frames) count(r io.Reader) {
	br := bufio.NewReader(r)
	if _, err := io.ReadFull(br, make([]byte, len(http2.ClientPreface))); err != nil {
		return
	}
	fr := http2.NewFramer(nil, br)
	for {
		frame, err := fr.ReadFrame()
		if err != nil {
			_, _ = io.Copy(io.Discard, br) // keep relaying what does not parse
			return
		}
		switch frame := frame.(type) {
		case *http2.PingFrame:
			if !frame.IsAck() {
				f.Pings.Add(1)
			}
		case *http2.DataFrame:
			f.Data.Add(1)
		}
	}
}

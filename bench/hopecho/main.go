package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const msgBytes = 120

func main() {
	role := flag.String("role", "", "internal: server or client (a child process)")
	mode := flag.String("mode", "grpc", "internal: grpc or frames")
	addr := flag.String("addr", "", "internal: the server's address")
	callers := flag.String("callers", "1,4", "comma-separated numbers of concurrent callers")
	rounds := flag.Int("rounds", 3, "rounds per transport and caller count (the report shows medians)")
	dur := flag.Duration("duration", 5*time.Second, "measured time per run")
	flag.Parse()
	var err error
	switch *role {
	case "server":
		err = serve(*mode)
	case "client":
		var n int
		if n, err = strconv.Atoi(*callers); err == nil {
			err = runClient(*mode, *addr, n, *dur)
		}
	default:
		err = compare(*callers, *rounds, *dur)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hopecho:", err)
		os.Exit(1)
	}
}

// compare runs every transport for every caller count, rounds times,
// alternating transports so that the machine's slow spells spread.
func compare(callers string, rounds int, dur time.Duration) error {
	if rounds < 1 || dur <= 0 {
		return errors.New("-rounds must be at least 1 and -duration positive")
	}
	for _, c := range strings.Split(callers, ",") {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			return fmt.Errorf("-callers %q: want positive numbers", callers)
		}
		rates, cpus := map[string][]float64{}, map[string][]float64{}
		for r := 1; r <= rounds; r++ {
			for _, mode := range []string{"grpc", "frames"} {
				rate, cpu, err := runPair(mode, n, dur)
				if err != nil {
					return fmt.Errorf("%s, %d callers: %w", mode, n, err)
				}
				fmt.Printf("round %d  %-6s %2d callers  %8.0f round trips/s  %6.1f µs CPU per round trip\n", r, mode, n, rate, cpu)
				rates[mode], cpus[mode] = append(rates[mode], rate), append(cpus[mode], cpu)
			}
		}
		for _, mode := range []string{"grpc", "frames"} {
			fmt.Printf("median %-6s %2d callers  %8.0f round trips/s  %6.1f µs CPU per round trip\n", mode, n, median(rates[mode]), median(cpus[mode]))
		}
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// runPair starts a server and a client of mode as child processes and
// returns the client's round trips per second and both processes' CPU
// per round trip, in µs.
func runPair(mode string, callers int, dur time.Duration) (rate, cpuPerRT float64, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	srv := exec.Command(self, "-role", "server", "-mode", mode)
	out, err := srv.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return 0, 0, err
	}
	defer func() {
		if srv.Process != nil {
			srv.Process.Kill()
			srv.Wait()
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n') // the server prints its address
	if err != nil {
		return 0, 0, fmt.Errorf("server: %w", err)
	}
	cli := exec.Command(self, "-role", "client", "-mode", mode, "-addr", strings.TrimSpace(line), "-callers", strconv.Itoa(callers), "-duration", dur.String())
	cli.Stderr = os.Stderr
	res, err := cli.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("client: %w", err)
	}
	srv.Process.Signal(syscall.SIGTERM)
	srv.Wait()
	srv.Process = nil // waited: its CPU is in the children's usage now
	n, err := strconv.ParseFloat(strings.TrimSpace(string(res)), 64)
	if err != nil || n <= 0 {
		return 0, 0, fmt.Errorf("client printed %q", res)
	}
	cpu := childCPU(cli.ProcessState) + childCPU(srv.ProcessState)
	return n / dur.Seconds(), cpu.Seconds() * 1e6 / n, nil
}

func childCPU(ps *os.ProcessState) time.Duration {
	if ps == nil {
		return 0
	}
	return ps.UserTime() + ps.SystemTime()
}

// serve echoes every message back until SIGTERM (the default action ends
// the process).
func serve(mode string) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(l.Addr())
	if mode == "grpc" {
		s := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.StaticStreamWindowSize(1<<20), grpc.StaticConnWindowSize(16<<20))
		s.RegisterService(&grpc.ServiceDesc{ServiceName: "hopecho.Echo", HandlerType: (*any)(nil), Streams: []grpc.StreamDesc{{
			StreamName: "Echo", ServerStreams: true, ClientStreams: true,
			Handler: func(_ any, st grpc.ServerStream) error {
				var b []byte
				for {
					if err := st.RecvMsg(&b); err != nil {
						return err
					}
					if err := st.SendMsg(&b); err != nil {
						return err
					}
				}
			}}}}, nil)
		return s.Serve(l)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go echoFrames(c)
	}
}

// echoFrames answers each length-prefixed frame with itself, flushing
// once nothing more has arrived.
func echoFrames(c net.Conn) {
	defer c.Close()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		b, err := readFrame(r)
		if err != nil {
			return
		}
		if writeFrame(w, b) != nil {
			return
		}
		if r.Buffered() == 0 && w.Flush() != nil {
			return
		}
	}
}

func readFrame(r *bufio.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

func writeFrame(w *bufio.Writer, b []byte) error {
	w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b))))
	_, err := w.Write(b)
	return err
}

// link is one client's path to the server: send writes a message (one
// sender at a time), recv reads the next answer.
type link struct {
	send func([]byte) error
	recv func() error
}

// runClient sends from callers goroutines back to back for dur and prints
// the round trips completed.
func runClient(mode, addr string, callers int, dur time.Duration) error {
	l, closeLink, err := dial(mode, addr)
	if err != nil {
		return err
	}
	defer closeLink()
	waiters := make(chan chan struct{}, callers)
	go func() { // answers come back in order: hand each to the next waiter
		for l.recv() == nil {
			(<-waiters) <- struct{}{}
		}
	}()
	var mu sync.Mutex
	var n atomic.Int64
	end := time.Now().Add(dur)
	msg := make([]byte, msgBytes)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			done := make(chan struct{}, 1)
			for time.Now().Before(end) {
				mu.Lock()
				waiters <- done
				err := l.send(msg)
				mu.Unlock()
				if err != nil {
					return
				}
				<-done
				n.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Println(n.Load())
	return nil
}

func dial(mode, addr string) (link, func(), error) {
	if mode == "grpc" {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithStaticStreamWindowSize(1<<20), grpc.WithStaticConnWindowSize(16<<20))
		if err != nil {
			return link{}, nil, err
		}
		st, err := cc.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/hopecho.Echo/Echo", grpc.ForceCodec(rawCodec{}))
		if err != nil {
			cc.Close()
			return link{}, nil, err
		}
		var b []byte
		return link{send: func(m []byte) error { return st.SendMsg(&m) }, recv: func() error { return st.RecvMsg(&b) }},
			func() { cc.Close() }, nil
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return link{}, nil, err
	}
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	return link{
		send: func(m []byte) error {
			if err := writeFrame(w, m); err != nil {
				return err
			}
			return w.Flush()
		},
		recv: func() error { _, err := readFrame(r); return err },
	}, func() { c.Close() }, nil
}

// rawCodec sends []byte messages as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	p := v.(*[]byte)
	*p = append((*p)[:0], b...)
	return nil
}
func (rawCodec) Name() string { return "hopecho-raw" }

package server

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/commands"
)

// batchHarness is the connection loop's work for one read of pipelined
// requests: read each ahead (or, with parse set, parse it instead),
// dispatch it, encode its reply, flush.
type batchHarness struct {
	s     *Server
	cl    *commands.Client
	w     *commands.Writer
	p     parser
	la    lookahead
	parse bool
	req   []byte
}

func newBatchHarness(tb testing.TB, keys int) *batchHarness {
	s := newTestServer(tb)
	w := commands.NewWriter(io.Discard)
	h := &batchHarness{s: s, w: w}
	h.cl = s.table.NewClient(commands.ClientOptions{ID: 1, Writer: w, Authorized: true})
	for i := range 16 { // 16 pipelined requests, as redis-benchmark -P 16
		key := fmt.Sprintf("user:%012d", i*7919%keys)
		h.req = fmt.Appendf(h.req, "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n", len(key), key)
	}
	return h
}

func (h *batchHarness) run() {
	b := h.req
	lim := bounds{maxBulk: 1 << 20, maxQuery: 1 << 30, authed: true}
	h.la.reset(0)
	for r := 0; r < len(b); {
		if !h.parse {
			h.la.advance(b, r, lim, h.s.table, h.s.loc)
			q := h.la.take(r)
			if q == nil {
				panic(fmt.Sprint("not read ahead at ", r))
			}
			h.s.table.DispatchFound(h.cl, q.cmd, h.p.fromSpans(b, q.spans[:q.nargs]), q.key)
			r += q.used
			continue
		}
		args, used, err := h.p.next(b[r:], lim)
		if err != nil || used == 0 {
			panic(fmt.Sprint("parse: ", used, err))
		}
		r += used
		h.s.table.Dispatch(h.cl, args)
	}
	h.p.release()
	h.w.Flush()
}

// The whole path of a request, from bytes read to bytes written,
// allocates nothing in steady state: read ahead, or parsed.
func TestServeBatchDoesNotAllocate(t *testing.T) {
	for _, parse := range []bool{false, true} {
		h := newBatchHarness(t, 16)
		h.parse = parse
		for range 100 {
			h.run()
		}
		if n := testing.AllocsPerRun(200, h.run); n != 0 {
			t.Fatalf("parse %v: %v allocations per batch of 16 requests, want 0", parse, n)
		}
	}
}

// BenchmarkServeBatch: one op is one request of a -P 16 batch of
// CL.THROTTLE on existing keys, from bytes read to bytes written.
func BenchmarkServeBatch(b *testing.B) {
	h := newBatchHarness(b, 16)
	h.run()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N / 16 {
		h.run()
	}
}

// scriptConn is a net.Conn whose every Read returns a -P 16 batch of one
// command on random keys among keys, and whose writes are counted and
// dropped: the connection loop with no system calls.
type scriptConn struct {
	net.Conn // nil: only Read, Write, Close and the addresses are used
	batch    []byte
	digits   []int // where each request's 12-digit key number starts in batch
	rng      *rand.Rand
	keys     int
	left     int // batches still to return
	written  int
	first    []byte // the start of the first write
}

// newScriptConn returns a scriptConn for batches of the command name
// key:NNNNNNNNNNNN args....
func newScriptConn(keys, batches int, name string, args ...string) *scriptConn {
	c := &scriptConn{rng: rand.New(rand.NewPCG(1, 2)), keys: keys, left: batches}
	for range 16 {
		c.batch = fmt.Appendf(c.batch, "*%d\r\n$%d\r\n%s\r\n$16\r\nkey:", 2+len(args), len(name), name)
		c.digits = append(c.digits, len(c.batch))
		c.batch = append(c.batch, "000000000000\r\n"...)
		for _, a := range args {
			c.batch = fmt.Appendf(c.batch, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	return c
}

func (c *scriptConn) Read(b []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	c.left--
	for _, d := range c.digits {
		n := c.rng.IntN(c.keys)
		for i := d + 11; i >= d; i-- {
			c.batch[i] = byte('0' + n%10)
			n /= 10
		}
	}
	return copy(b, c.batch), nil
}

func (c *scriptConn) Write(b []byte) (int, error) {
	if c.first == nil {
		c.first = bytes.Clone(b[:min(len(b), 64)])
	}
	c.written += len(b)
	return len(b), nil
}

func (c *scriptConn) Close() error { return nil }
func (c *scriptConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379}
}
func (c *scriptConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}
}
func (c *scriptConn) SetReadDeadline(time.Time) error { return nil }

func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkServeConn: one op is one request of a redis-benchmark -P 16
// workload of bench/run.sh (random keys among a million, starting empty),
// through the whole connection loop, lookahead and prefetching included,
// without the sockets. Run it with -benchtime 2000000x, as bench/run.sh's
// -P 16 runs.
func BenchmarkServeConn(b *testing.B) {
	for _, w := range []struct {
		name string
		args []string
	}{
		{"CL.THROTTLE", []string{"15", "30", "60"}},
		{"TB.TAKE", []string{"15", "1", "2"}},
		{"SW.HIT", []string{"30", "60"}},
		{"FW.INCR", []string{"30", "60"}},
		{"SW.HIT", []string{"100", "60", "EXACT"}},
	} {
		b.Run(strings.Join(append([]string{w.name}, w.args...), "_"), func(b *testing.B) {
			s := newTestServer(b)
			nc := newScriptConn(1_000_000, b.N/16+1, w.name, w.args...)
			c := s.admit(nc)
			if c == nil {
				b.Fatal("the server refused the scripted connection")
			}
			b.ResetTimer()
			c.serve()
			b.StopTimer()
			if !bytes.HasPrefix(nc.first, []byte("*5\r\n")) {
				b.Fatalf("replies start %q", nc.first)
			}
		})
	}
}

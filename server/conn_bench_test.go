package server

import (
	"fmt"
	"io"
	"testing"

	"github.com/cellserver/cellserver/commands"
)

// batchHarness is the connection loop's work for one read of pipelined
// requests: parse each, dispatch it, encode its reply, flush.
type batchHarness struct {
	s   *Server
	cl  *commands.Client
	w   *commands.Writer
	p   parser
	req []byte
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
	for len(b) > 0 {
		args, used, err := h.p.next(b, bounds{maxBulk: 1 << 20, maxQuery: 1 << 30, authed: true})
		if err != nil || used == 0 {
			panic(fmt.Sprint("parse: ", used, err))
		}
		b = b[used:]
		h.s.table.Dispatch(h.cl, args)
	}
	h.p.release()
	h.w.Flush()
}

// The whole path of a request, from bytes read to bytes written,
// allocates nothing in steady state.
func TestServeBatchDoesNotAllocate(t *testing.T) {
	h := newBatchHarness(t, 16)
	for range 100 {
		h.run()
	}
	if n := testing.AllocsPerRun(200, h.run); n != 0 {
		t.Fatalf("%v allocations per batch of 16 requests, want 0", n)
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

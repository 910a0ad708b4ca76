package bench

// Benchmarks of the limiter commands at four depths, each with
// b.ReportAllocs:
//
//	BenchmarkCommand   commands.Table.Dispatch into an in-memory redcon.Writer:
//	                   parsing, the engine and the reply, no network.
//	BenchmarkRESP      the same plus redcon's request parser, fed a pipeline of
//	                   RESP bytes from memory (what the server does per read).
//	BenchmarkEngine    engine.Engine's methods with validated parameters.
//	BenchmarkTCP       a go-redis client over 127.0.0.1 to a server in this
//	                   process (allocations are client's and server's together).
//
// "new" runs hit keys the engine has never seen (one insert per op, like
// redis-benchmark -r 1000000); "existing" first touches every key it will
// use, so each measured op updates a live key: the steady state the
// zero-allocation target is about. BenchmarkMemory reports the memory a
// live key costs (Go heap and the tables' off-heap arrays, as used_memory). Keys come from a fixed, pre-built set of 17-byte names.
//
// Run: go test -run xxx -bench . -benchtime 200000x ./bench/

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit/inproc"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cellserver/cellserver/server"
	"github.com/redis/go-redis/v9"
)

// benchKeyCount is the size of the pre-built key set.
const benchKeyCount = 1 << 20

// benchKeys returns benchKeyCount distinct 17-byte keys, "user:000000000000"
// on, sharing one backing array so that building them is not measured.
var benchKeys = sync.OnceValue(func() [][]byte { return makeKeys(benchKeyCount) })

func makeKeys(n int) [][]byte {
	const width = 17
	buf := make([]byte, 0, n*width)
	keys := make([][]byte, n)
	for i := range keys {
		buf = fmt.Appendf(buf, "user:%012d", i)
		keys[i] = buf[len(buf)-width : len(buf) : len(buf)]
	}
	return keys
}

// limiterCase is one limiter command with arguments comparable to
// CL.THROTTLE key 15 30 60 (a burst of 16, 30 per minute), as bench/run.sh
// sends them.
type limiterCase struct {
	name string
	args []string // args[1], the key, is replaced per op
	// op calls the engine directly with the same, already validated, request.
	op func(e *engine.Engine, key []byte) (limiter.Result, error)
}

func limiterCases(tb testing.TB) []limiterCase {
	gcra, err := limiter.GCRARequest{MaxBurst: 15, Count: 30, Period: 60, Quantity: 1}.Params()
	if err != nil {
		tb.Fatal(err)
	}
	tbReq := limiter.TokenBucketRequest{Capacity: 16, Refill: 30, Period: 60, Cost: 1}
	swReq := limiter.SlidingWindowRequest{Limit: 30, Window: 60, Cost: 1}
	slReq := limiter.SlidingWindowRequest{Limit: 100, Window: 60, Cost: 1, Exact: true}
	fwReq := limiter.FixedWindowRequest{Limit: 30, Window: 60, Cost: 1}
	lbReq := limiter.LeakyQueueRequest{Capacity: 16, Rate: 30, Period: 60, Cost: 1}
	for _, v := range []interface{ Validate() error }{tbReq, swReq, slReq, fwReq, lbReq} {
		if err := v.Validate(); err != nil {
			tb.Fatal(err)
		}
	}
	return []limiterCase{
		{"CL.THROTTLE", []string{"CL.THROTTLE", "", "15", "30", "60"},
			func(e *engine.Engine, k []byte) (limiter.Result, error) { return e.Apply(k, gcra.Request(), nil) }},
		{"TB.TAKE", []string{"TB.TAKE", "", "16", "30", "60"},
			func(e *engine.Engine, k []byte) (limiter.Result, error) { return e.Apply(k, tbReq.Request(), nil) }},
		{"SW.HIT", []string{"SW.HIT", "", "30", "60"},
			func(e *engine.Engine, k []byte) (limiter.Result, error) { return e.Apply(k, swReq.Request(), nil) }},
		{"SW.HIT_EXACT", []string{"SW.HIT", "", "100", "60", "EXACT"},
			func(e *engine.Engine, k []byte) (limiter.Result, error) { return e.Apply(k, slReq.Request(), nil) }},
		{"FW.INCR", []string{"FW.INCR", "", "30", "60"},
			func(e *engine.Engine, k []byte) (limiter.Result, error) { return e.Apply(k, fwReq.Request(), nil) }},
		{"LB.QUEUE", []string{"LB.QUEUE", "", "16", "30", "60"},
			func(e *engine.Engine, k []byte) (limiter.Result, error) { return e.Apply(k, lbReq.Request(), nil) }},
	}
}

func byteArgs(words []string) [][]byte {
	out := make([][]byte, len(words))
	for i, w := range words {
		out[i] = []byte(w)
	}
	return out
}

// cmdHarness is one client of a real server.Server's command layer whose
// replies go to an in-memory writer. The server does not listen.
type cmdHarness struct {
	tbl *commands.Table
	cl  *commands.Client
	w   *commands.Writer
	srv *server.Server
}

func newServer(tb testing.TB) *server.Server {
	cfg := server.DefaultConfig()
	cfg.LogLevel = "nothing"
	srv, err := server.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	return srv
}

// serveTCP serves a server of newServer's configuration on loopback until
// the benchmark ends.
func serveTCP(tb testing.TB) *inproc.Server {
	return inproc.Start(tb, func(c *server.Config) { c.EnableDebugCommand = false })
}

// newCmdHarness builds the command table over a fresh server. The server
// keeps its own table private; commands.NewTable over the same Host is the
// same table, so no accessor is needed.
func newCmdHarness(tb testing.TB) *cmdHarness {
	srv := newServer(tb)
	h := &cmdHarness{srv: srv, tbl: commands.NewTable(srv, commands.Options{}), w: commands.NewWriter(io.Discard)}
	h.cl = h.newClient(h.w, 1)
	return h
}

func (h *cmdHarness) newClient(w *commands.Writer, id int64) *commands.Client {
	return h.tbl.NewClient(commands.ClientOptions{ID: id, Addr: "127.0.0.1:1", LocalAddr: "127.0.0.1:2", Writer: w, Authorized: true})
}

// do runs one command and flushes its reply, as the server does for a
// non-pipelined request.
func (h *cmdHarness) do(args [][]byte) {
	h.tbl.Dispatch(h.cl, args)
	_ = h.w.Flush()
}

// check runs args once on a side client and fails unless the reply starts
// with want, so that a benchmark never measures an error path.
func (h *cmdHarness) check(tb testing.TB, args [][]byte, want string) {
	var buf bytes.Buffer
	w := commands.NewWriter(&buf)
	h.tbl.Dispatch(h.newClient(w, 2), args)
	_ = w.Flush()
	if !bytes.HasPrefix(buf.Bytes(), []byte(want)) {
		tb.Fatalf("%q replied %q, want prefix %q", bytes.Join(args, []byte(" ")), buf.String(), want)
	}
}

func BenchmarkCommand(b *testing.B) {
	keys := benchKeys()
	for _, c := range limiterCases(b) {
		b.Run(c.name, func(b *testing.B) {
			b.Run("new", func(b *testing.B) {
				h := newCmdHarness(b)
				args := byteArgs(c.args)
				h.check(b, append([][]byte{args[0], []byte("check:key")}, args[2:]...), "*5\r\n:0\r\n")
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					args[1] = keys[i%len(keys)]
					h.do(args)
				}
			})
			b.Run("existing", func(b *testing.B) {
				h := newCmdHarness(b)
				args := byteArgs(c.args)
				for i := range min(b.N, len(keys)) {
					args[1] = keys[i]
					h.do(args)
				}
				args[1] = keys[0]
				h.check(b, args, "*5\r\n:0\r\n")
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					args[1] = keys[i%len(keys)]
					h.do(args)
				}
			})
		})
	}
	b.Run("PING", func(b *testing.B) { // the dispatch floor
		h := newCmdHarness(b)
		args := byteArgs([]string{"PING"})
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			h.do(args)
		}
	})
}

// BenchmarkCommandParallel runs CL.THROTTLE on existing keys from
// GOMAXPROCS clients at once, each on its own stretch of the key set.
func BenchmarkCommandParallel(b *testing.B) {
	keys := benchKeys()
	h := newCmdHarness(b)
	args := byteArgs([]string{"CL.THROTTLE", "", "15", "30", "60"})
	for i := range min(b.N, len(keys)) {
		args[1] = keys[i]
		h.do(args)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := next.Add(1)
		w := commands.NewWriter(io.Discard)
		cl := h.newClient(w, 10+id)
		args := byteArgs([]string{"CL.THROTTLE", "", "15", "30", "60"})
		i := int(id) * 7919
		for pb.Next() {
			args[1] = keys[i%min(b.N, len(keys))]
			h.tbl.Dispatch(cl, args)
			_ = w.Flush()
			i++
		}
	})
}

func BenchmarkEngine(b *testing.B) {
	keys := benchKeys()
	for _, c := range limiterCases(b) {
		b.Run(c.name, func(b *testing.B) {
			for _, warm := range []bool{false, true} {
				name := "new"
				if warm {
					name = "existing"
				}
				b.Run(name, func(b *testing.B) {
					e, err := engine.New(engine.Config{})
					if err != nil {
						b.Fatal(err)
					}
					if warm {
						for i := range min(b.N, len(keys)) {
							_, _ = c.op(e, keys[i])
						}
					}
					if r, err := c.op(e, keys[0]); err != nil || r.Limited {
						b.Fatalf("%s: %+v, %v", c.name, r, err)
					}
					b.ReportAllocs()
					b.ResetTimer()
					for i := range b.N {
						_, _ = c.op(e, keys[i%len(keys)])
					}
				})
			}
		})
	}
}

// BenchmarkMemory inserts b.N distinct 17-byte keys into an engine and
// reports the live memory per key after a GC (heap-B/key: the Go heap plus
// the tables' arrays kept outside it). Run it with -benchtime 1000000x for
// the 1M-key figure.
func BenchmarkMemory(b *testing.B) {
	for _, c := range limiterCases(b) {
		b.Run(c.name, func(b *testing.B) {
			keys := benchKeys()
			if b.N > len(keys) {
				keys = makeKeys(b.N)
			}
			e, err := engine.New(engine.Config{})
			if err != nil {
				b.Fatal(err)
			}
			before := liveHeap(e)
			b.ResetTimer()
			for i := range b.N {
				_, _ = c.op(e, keys[i])
			}
			b.StopTimer()
			after := liveHeap(e)
			if n := e.DBSize(); n != int64(b.N) {
				b.Fatalf("DBSize %d after %d inserts", n, b.N)
			}
			b.ReportMetric(float64(int64(after)-int64(before))/float64(b.N), "heap-B/key")
			runtime.KeepAlive(e)
		})
	}
}

// liveHeap returns the live Go heap after a collection plus e's off-heap
// arrays: what INFO used_memory reports.
func liveHeap(e *engine.Engine) uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + uint64(e.OffHeapBytes())
}

// BenchmarkTCP sends CL.THROTTLE with go-redis over a loopback connection
// to a server running in this process, one request at a time (P1) and in
// pipelines of 16 (P16). ns/op is per command.
func BenchmarkTCP(b *testing.B) {
	srv := serveTCP(b)
	keys := benchKeys()
	strKeys := make([]string, 65536)
	for i := range strKeys {
		strKeys[i] = string(keys[i])
	}
	ctx := context.Background()
	for _, depth := range []int{1, 16} {
		b.Run(fmt.Sprintf("CL.THROTTLE/P%d", depth), func(b *testing.B) {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1, DisableIdentity: true})
			defer rdb.Close()
			if err := rdb.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			slots := make([][]any, depth)
			for j := range slots {
				slots[j] = []any{"CL.THROTTLE", "", "15", "30", "60"}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += depth {
				if depth == 1 {
					slots[0][1] = strKeys[i%len(strKeys)]
					if err := rdb.Do(ctx, slots[0]...).Err(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				pipe := rdb.Pipeline()
				for j := range slots {
					slots[j][1] = strKeys[(i+j)%len(strKeys)]
					pipe.Do(ctx, slots[j]...)
				}
				if _, err := pipe.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

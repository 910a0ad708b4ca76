package bench

import (
	"io"
	"sync/atomic"
	"testing"

	"github.com/cellserver/cellserver/commands"
)

// BenchmarkScaling runs CL.THROTTLE key 15 30 86400 through the command
// layer (parsing, the engine, the reply into memory) from b.RunParallel's
// goroutines, one client each: "random" on keys drawn at random from 1M
// live ones (each touched once first), "hot" all on one key. The period of
// a day keeps every key live for the whole run: the requests update keys,
// and the background sweep, which holds a shard's lock while it removes
// expired keys, finds none to remove. Run at GOMAXPROCS 1 and 2
// (-cpu 1,2), the ratio of ns/op at 1 to ns/op at 2 is what a second core
// adds; cpu-ns/op is the CPU one request takes, whatever the other
// processes on the machine do, and its ratio the same way tells how much
// of a core the shards' locks and shared cache lines cost.
//
// Run: go test -run xxx -bench Scaling -benchtime 2000000x -cpu 1,2 -count 5 ./bench/
func BenchmarkScaling(b *testing.B) {
	keys := benchKeys()
	h := newCmdHarness(b)
	args := byteArgs([]string{"CL.THROTTLE", "", "15", "30", "86400"})
	for _, k := range keys {
		args[1] = k
		h.do(args)
	}
	h.check(b, byteArgs([]string{"CL.THROTTLE", string(keys[0]), "15", "30", "86400"}), "*5\r\n:0\r\n")
	for _, hot := range []bool{false, true} {
		name := "random"
		if hot {
			name = "hot"
		}
		b.Run(name, func(b *testing.B) {
			var seeds atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU()
			b.RunParallel(func(pb *testing.PB) {
				w := commands.NewWriter(io.Discard)
				id := seeds.Add(1)
				cl := h.newClient(w, 100+int64(id))
				args := byteArgs([]string{"CL.THROTTLE", "", "15", "30", "86400"})
				args[1] = keys[0]
				x := 88172645463325252 * id // xorshift64, one sequence per goroutine
				for pb.Next() {
					if !hot {
						x ^= x << 13
						x ^= x >> 7
						x ^= x << 17
						args[1] = keys[x%uint64(len(keys))]
					}
					h.tbl.Dispatch(cl, args)
					_ = w.Flush()
				}
			})
			b.StopTimer()
			cpu.report(b)
		})
	}
}

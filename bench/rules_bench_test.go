package bench

import (
	"testing"
	"time"
)

// reportCPU reports the process's CPU time per op since cpu0 (cpu-ns/op):
// on a machine shared with other work it is what an op cost, where ns/op
// also counts the time others held the cores.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu1, ok := processCPU(); ok && b.N > 0 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkRLCheck is what a rule costs over calling its limiter
// directly: RL.CHECK of one descriptor (user=<id>) matching a fixed-window
// rule of an hour, against FW.INCR of the same limit and window on keys of
// the same count, both on live keys (each key touched once before the
// timer), through commands.Table.Dispatch into an in-memory writer as
// BenchmarkCommand does. RL.CHECK's ratio to FW.INCR is bench/RESULTS.md's
// "rules" figure.
//
// Run: go test -run xxx -bench RLCheck -benchtime 500000x -count 5 ./bench/
func BenchmarkRLCheck(b *testing.B) {
	const users = 1 << 14
	keys := benchKeys()[:users]
	b.Run("FW.INCR", func(b *testing.B) {
		h := newCmdHarness(b)
		args := byteArgs([]string{"FW.INCR", "", "1000000", "3600"})
		for _, k := range keys {
			args[1] = k
			h.do(args)
		}
		h.check(b, args, "*5\r\n:0\r\n")
		b.ReportAllocs()
		b.ResetTimer()
		cpu0, _ := processCPU()
		for i := range b.N {
			args[1] = keys[i%users]
			h.do(args)
		}
		reportCPU(b, cpu0)
	})
	b.Run("RL.CHECK", func(b *testing.B) {
		h := newCmdHarness(b)
		h.check(b, byteArgs([]string{"RULES", "SET", "bench",
			"domain: bench\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 1000000\n"}), "+OK")
		args := byteArgs([]string{"RL.CHECK", "bench", "user", ""})
		for _, k := range keys {
			args[3] = k
			h.do(args)
		}
		h.check(b, args, "*6\r\n:0\r\n")
		b.ReportAllocs()
		b.ResetTimer()
		cpu0, _ := processCPU()
		for i := range b.N {
			args[3] = keys[i%users]
			h.do(args)
		}
		reportCPU(b, cpu0)
	})
}

// Package bench holds cellserver's measurements: Go benchmarks of the
// limiter commands through the command layer, the engine and a TCP loopback
// connection (commands_bench_test.go), the scripted comparison against
// Redis and Redis + a Lua GCRA script (run.sh, gcra.lua), and the memory
// probe (memprobe/). Results go to RESULTS.md.
//
// It is a leaf: nothing imports it, and it uses only the exported API of
// server, commands and engine (no accessors added for its sake).
package bench

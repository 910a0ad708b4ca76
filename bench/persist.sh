#!/usr/bin/env bash
# bench/persist.sh — what persistence costs: memory per live CL.THROTTLE key
# with persistence off and on (bench/memprobe, both in this run), and the
# restore and snapshot times of 1M keys (BenchmarkRestore in persist/).
#
#   bench/persist.sh [all|mem|tput]   prints a Markdown section on stdout
#
# tput: redis-benchmark CL.THROTTLE over 1M random keys (-c 50, -P 1 and
# -P 16), persistence off against on (save 1 1: a snapshot of the keys
# changed in the last second, every second), alternating, BENCH_ROUNDS
# rounds.
#
# Environment: BENCH_MEM_KEYS [1000000], BENCH_MEM_PORT [7313],
# BENCH_N [400000], BENCH_ROUNDS [2].
# Persistence on means --dir <temporary directory> and the default rule
# (save 1 1): a snapshot each second while the keys go in.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$(dirname "$here")"
keys=${BENCH_MEM_KEYS:-1000000}
port=${BENCH_MEM_PORT:-7313}
tmp=$(mktemp -d)
pid=
cleanup() {
	if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
go build -o "$tmp/cellserver" ./cmd/cellserver
go build -o "$tmp/memprobe" ./bench/memprobe
probe() { # label, extra flags...
	local label=$1
	shift
	"$tmp/cellserver" --port "$port" --loglevel warning --enable-debug-command yes "$@" &
	pid=$!
	for _ in $(seq 100); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	echo "### $label"
	echo
	"$tmp/memprobe" -cellserver "127.0.0.1:$port" -cellserver-pid "$pid" -keys "$keys"
	echo
	kill "$pid"
	wait "$pid" || true
	pid=
}
what=${1:-all}
case $what in all | mem | tput) ;; *)
	echo "usage: bench/persist.sh [all|mem|tput]" >&2
	exit 2
	;;
esac
tput() {
	local n=${BENCH_N:-400000} rounds=${BENCH_ROUNDS:-2}
	echo "### CL.THROTTLE throughput, persistence off and on (redis-benchmark -c 50 -r 1000000 -n $n)"
	echo
	echo "| round | -P | persistence | requests/s | p50 ms | p99 ms |"
	echo "|---|---|---|---|---|---|"
	local round P mode out rps p50 p99
	for round in $(seq "$rounds"); do
		for P in 1 16; do
			for mode in off on; do
				local flags=(--threads 1)
				if [[ $mode == on ]]; then
					rm -rf "$tmp/tdir" && mkdir -p "$tmp/tdir"
					flags+=(--dir "$tmp/tdir")
				fi
				"$tmp/cellserver" --port "$port" --loglevel warning "${flags[@]}" &
				pid=$!
				for _ in $(seq 100); do
					redis-cli -p "$port" ping >/dev/null 2>&1 && break
					sleep 0.1
				done
				out=$(redis-benchmark -p "$port" -c 50 -r 1000000 -n "$n" -P "$P" -q --csv CL.THROTTLE key:__rand_int__ 15 30 60 | tail -1)
				# "name","rps","avg","min","p50","p95","p99","max"
				IFS=, read -r _ rps _ _ p50 _ p99 _ <<<"${out//\"/}"
				echo "| $round | $P | $mode | $rps | $p50 | $p99 |"
				kill "$pid"
				wait "$pid" || true
				pid=
			done
		done
	done
	echo
}
echo "## Persistence: memory per key, restore time, throughput"
echo
echo "- machine: $(nproc) cores, $(uname -sr); go: $(go env GOVERSION); commit $(git rev-parse --short HEAD)"
echo "- command: \`bench/persist.sh $what\` (BENCH_MEM_KEYS=$keys)"
echo
if [[ $what == tput ]]; then
	tput
	exit 0
fi
[[ ${BENCH_PERSIST_ONLY:-0} == 1 ]] || probe "persistence off" --threads 1
mkdir -p "$tmp/dir"
probe "persistence on (--dir, save 1 1)" --threads 1 --dir "$tmp/dir"
[[ $what == mem ]] || tput
echo "### Snapshot and restore of 1M keys (go test ./persist -run XXX -bench Restore -benchtime 1x -count 3)"
echo
echo '```'
go test ./persist -run XXX -bench Restore -benchtime 1x -count 3 | grep '^Benchmark'
echo '```'

#!/usr/bin/env bash
# bench/persist.sh — what persistence costs: memory per live CL.THROTTLE key
# with persistence off and on (bench/memprobe, both in this run), and the
# restore and snapshot times of 1M keys (BenchmarkRestore in persist/).
#
#   bench/persist.sh            prints a Markdown section on stdout
#
# Environment: BENCH_MEM_KEYS [1000000], BENCH_MEM_PORT [7313].
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
echo "## Persistence: memory per key and restore time"
echo
echo "- machine: $(nproc) cores, $(uname -sr); go: $(go env GOVERSION); commit $(git rev-parse --short HEAD)"
echo "- command: \`bench/persist.sh\` (BENCH_MEM_KEYS=$keys)"
echo
[[ ${BENCH_PERSIST_ONLY:-0} == 1 ]] || probe "persistence off" --threads 1
mkdir -p "$tmp/dir"
probe "persistence on (--dir, save 1 1)" --threads 1 --dir "$tmp/dir"
echo "### Snapshot and restore of 1M keys (go test ./persist -run XXX -bench Restore -benchtime 1x -count 3)"
echo
echo '```'
go test ./persist -run XXX -bench Restore -benchtime 1x -count 3 | grep '^Benchmark'
echo '```'

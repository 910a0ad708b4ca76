#!/usr/bin/env bash
# bench/persist.sh — what persistence costs: memory per live CL.THROTTLE key
# with persistence off and on (bench/memprobe, both in this run), and the
# restore and snapshot times of 1M keys (BenchmarkRestore in persist/).
#
#   bench/persist.sh [all|mem|tput]   prints a Markdown section on stdout
#
# tput: redis-benchmark CL.THROTTLE over BENCH_MEM_KEYS keys set first
# (-c 50, -P 1 and -P 16), persistence off against on (save 1 1: a
# snapshot of the keys changed in the last second, every second),
# alternating, BENCH_ROUNDS rounds, with the median of the on/off ratios.
#
# Environment: BENCH_MEM_KEYS [1000000], BENCH_MEM_PORT [7313],
# BENCH_N [400000; 5x at -P 16], BENCH_ROUNDS [3], BENCH_PIPES ["1 16"],
# BENCH_BASE [none]: a git revision whose build also runs with
# persistence on in every round (mode "base"), after this tree's, for a
# before/after in the same rounds.
# Persistence on means --dir <temporary directory> and the default rule
# (save 1 1): a snapshot each second while the keys go in.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$(dirname "$here")"
keys=${BENCH_MEM_KEYS:-1000000}
port=${BENCH_MEM_PORT:-7313}
mport=$((port + 1))
tmp=$(mktemp -d)
pid=
cleanup() {
	if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	if [[ -d $tmp/base ]]; then git worktree remove --force "$tmp/base" || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
go build -o "$tmp/cellserver" ./cmd/cellserver
go build -o "$tmp/memprobe" ./bench/memprobe
modes=(off on)
if [[ -n ${BENCH_BASE:-} ]]; then
	git worktree add --detach "$tmp/base" "$BENCH_BASE" >/dev/null 2>&1
	(cd "$tmp/base" && go build -o "$tmp/cellserver-base" ./cmd/cellserver)
	modes+=(base)
fi
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
# prefill sets keys key:000000000000 on, as redis-benchmark -r names
# them, one allowed CL.THROTTLE each (15 1 3600: they live an hour),
# through redis-cli --pipe.
prefill() {
	awk -v n="$keys" 'BEGIN { for (i = 0; i < n; i++) { k = sprintf("key:%012d", i);
		printf "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$2\r\n15\r\n$1\r\n1\r\n$4\r\n3600\r\n", length(k), k } }' |
		redis-cli -p "$port" --pipe >/dev/null
}
# scrape prints the value of one series of the server's /metrics.
scrape() { curl -s "http://127.0.0.1:$mport/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
snapshots() { scrape 'cellserver_snapshots_total{outcome="ok"}'; }
# settled waits until the last snapshot has written every change.
settled() {
	for _ in $(seq 300); do
		redis-cli -p "$port" info persistence | grep -q '^rdb_changes_since_last_save:0' && return 0
		sleep 0.1
	done
	echo "the snapshots did not catch up" >&2
	return 1
}
tput() {
	local n=${BENCH_N:-400000} rounds=${BENCH_ROUNDS:-3}
	echo "### CL.THROTTLE throughput, persistence off and on"
	echo
	echo "Each run: a fresh server (--threads 1), $keys keys set first (persistence on: until a snapshot holds"
	echo "them all), then \`redis-benchmark -c 50 -r $keys -n <n> -P <P> CL.THROTTLE key:__rand_int__ 15 1 3600\`"
	echo "(n = $n at -P 1, $((n * 5)) at -P 16): every request changes a key, so with save 1 1 each second's"
	echo "snapshot writes the keys changed in that second. Rounds alternate off and on; the ratio is on/off"
	echo "within a round. Load is \`uptime\`'s 1-minute average before each run."
	echo
	echo "| round | -P | persistence | load | requests/s | p50 ms | p99 ms | snapshots (the last's time) | on/off |"
	echo "|---|---|---|---|---|---|---|---|---|"
	local round P mode out rps p50 p99 load snaps offrps ratio
	local ratios1=() ratios16=() bratios1=() bratios16=()
	for round in $(seq "$rounds"); do
		for P in ${BENCH_PIPES:-1 16}; do
			for mode in "${modes[@]}"; do
				local flags=(--threads 1) bin=$tmp/cellserver
				[[ $mode != base ]] || bin=$tmp/cellserver-base
				if [[ $mode != off ]]; then
					rm -rf "$tmp/tdir" && mkdir -p "$tmp/tdir"
					flags+=(--dir "$tmp/tdir")
				fi
				"$bin" --port "$port" --loglevel warning --metrics-addr "127.0.0.1:$mport" "${flags[@]}" &
				pid=$!
				for _ in $(seq 100); do
					redis-cli -p "$port" ping >/dev/null 2>&1 && break
					sleep 0.1
				done
				prefill
				[[ $mode == off ]] || settled
				local before=0
				[[ $mode == off ]] || before=$(snapshots)
				load=$(cut -d' ' -f1 /proc/loadavg)
				local count=$n
				[[ $P == 1 ]] || count=$((n * 5))
				out=$(redis-benchmark -p "$port" -c 50 -r "$keys" -n "$count" -P "$P" -q --csv CL.THROTTLE key:__rand_int__ 15 1 3600 | tail -1)
				# "name","rps","avg","min","p50","p95","p99","max"
				IFS=, read -r _ rps _ _ p50 _ p99 _ <<<"${out//\"/}"
				snaps=-
				if [[ $mode != off ]]; then
					snaps="$(($(snapshots) - before)) ($(scrape cellserver_snapshot_last_duration_seconds) s)"
				fi
				ratio=
				if [[ $mode == off ]]; then
					offrps=$rps
				else
					ratio=$(awk -v a="$rps" -v b="$offrps" 'BEGIN { printf "%.2f", a / b }')
					if [[ $mode == on && $P == 1 ]]; then ratios1+=("$ratio"); fi
					if [[ $mode == on && $P != 1 ]]; then ratios16+=("$ratio"); fi
					if [[ $mode == base && $P == 1 ]]; then bratios1+=("$ratio"); fi
					if [[ $mode == base && $P != 1 ]]; then bratios16+=("$ratio"); fi
				fi
				echo "| $round | $P | $mode | $load | $rps | $p50 | $p99 | $snaps | $ratio |"
				kill "$pid"
				wait "$pid" || true
				pid=
			done
		done
	done
	echo
	median() {
		[[ $# -gt 0 ]] || { echo -; return; }
		printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
	}
	echo "Median on/off ratio: -P 1 $(median "${ratios1[@]}"), -P 16 $(median "${ratios16[@]}") ($rounds rounds)."
	if [[ -n ${BENCH_BASE:-} ]]; then
		echo "Median base/off ratio ($BENCH_BASE): -P 1 $(median "${bratios1[@]}"), -P 16 $(median "${bratios16[@]}")."
	fi
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

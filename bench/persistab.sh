#!/usr/bin/env bash
# bench/persistab.sh — builds of cellserver side by side under snapshots.
#
#   bench/persistab.sh ROUNDS P LABEL=BIN[,VAR=VALUE...] ...
#
# Each round runs a fresh server per configuration, on 127.0.0.1 only:
# first BIN of the first configuration with persistence off ("off"), then
# every LABEL with persistence on (--dir, the default rule save 1 1), BIN
# started with the environment VAR=VALUE pairs given. Every server runs
# --threads 1 and gets 1M keys set first (key:000000000000 on, 15 1 3600,
# as bench/persist.sh's prefill), persistence on waiting until a snapshot
# holds them, then one redis-benchmark -c 50 -r 1000000 -P P run of
# CL.THROTTLE over them (BENCH_N requests: default 2M at -P 16, 400k at -P 1). A LABEL
# starting "idle" adds --save "" (persistence on, no snapshot ever runs);
# one starting "default" leaves threads at its default (0: sized while
# running) instead of 1.
# One line per run: requests/s, p50, p99 and max (ms), snapshots during
# the run and the last one's duration (s).
#
# Example: BIN=$(mktemp) && go build -o "$BIN" ./cmd/cellserver &&
#   bench/persistab.sh 3 16 on="$BIN" gc200="$BIN",GOGC=200
set -euo pipefail
NAME=persistab HOST=127.0.0.1
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh

rounds=$1 P=$2
shift 2
[[ $# -gt 0 ]] || { echo "usage: bench/persistab.sh ROUNDS P LABEL=BIN[,VAR=VALUE...] ..." >&2; exit 2; }
port=$(free_port 7521)
mport=$(free_port $((port + 1)))
n=${BENCH_N:-2000000}
[[ $P != 1 || -n ${BENCH_N:-} ]] || n=400000

metric() { curl -s "http://$HOST:$mport/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
snapshots() { local v; v=$(metric 'cellserver_snapshots_total{outcome="ok"}'); echo "${v:-0}"; }

run() { # LABEL BIN [VAR=VALUE...]
	local label=$1 bin=$2
	shift 2
	local flags=(--threads 1)
	[[ $label != default* ]] || flags=()
	if [[ $label != off ]]; then
		rm -rf "$tmp/dir" && mkdir -p "$tmp/dir"
		flags+=(--dir "$tmp/dir")
		[[ $label != idle* ]] || flags+=(--save "")
	fi
	env "$@" "$bin" --bind "$HOST" --port "$port" --loglevel warning --metrics-addr "$HOST:$mport" "${flags[@]}" &
	local pid=$!
	pids+=("$pid")
	for _ in $(seq 100); do redis-cli -h "$HOST" -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
	awk 'BEGIN { for (i = 0; i < 1000000; i++) { k = sprintf("key:%012d", i);
		printf "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$2\r\n15\r\n$1\r\n1\r\n$4\r\n3600\r\n", length(k), k } }' |
		redis-cli -h "$HOST" -p "$port" --pipe >/dev/null
	if [[ $label != off ]]; then
		for _ in $(seq 300); do
			redis-cli -h "$HOST" -p "$port" info persistence | grep -q '^rdb_changes_since_last_save:0' && break
			sleep 0.1
		done
	fi
	local before out after last rps p50 p99 max
	before=$(snapshots)
	out=$(redis-benchmark -h "$HOST" -p "$port" -c 50 -r 1000000 -n "$n" -P "$P" -q --csv CL.THROTTLE key:__rand_int__ 15 1 3600 | tail -1)
	after=$(snapshots)
	last=$(metric cellserver_snapshot_last_duration_seconds)
	IFS=, read -r _ rps _ _ p50 _ p99 max <<<"${out//\"/}"
	printf '%-8s -P %-3s %11s p50 %6s p99 %6s max %7s snapshots %s last %.3f\n' \
		"$label" "$P" "$rps" "$p50" "$p99" "$max" "$((${after%.*} - ${before%.*}))" "${last:-0}"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
}

for _ in $(seq "$rounds"); do
	first=$1
	IFS=, read -ra cfg <<<"${first#*=}"
	run off "${cfg[0]}"
	for c in "$@"; do
		IFS=, read -ra cfg <<<"${c#*=}"
		run "${c%%=*}" "${cfg[@]}"
	done
done

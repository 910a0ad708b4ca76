#!/usr/bin/env bash
# bench/threads.sh — the threads setting against Redis's PING, side by side.
#
#   bench/threads.sh [ROUNDS] [N1] [N16]
#
# ROUNDS rounds [3] of, at -P 1 (N1 requests [400000]) and -P 16 (N16
# [2000000]), redis-benchmark -c 50 -r 1000000 against: redis-server's PING,
# then cellserver's CL.THROTTLE with --threads 1, --threads 2 and the
# default (0, sized while running), each server started fresh and warmed
# with a short run first (so that the default has measured the machine's
# load). Prints one line per run and, per setting, the median over rounds of
# its ratio to Redis's PING in the same round.
#
# The warm-up runs on the measured run's keys (user:…), so that the
# measurement sees the keyspace in its steady state: about a million live
# keys, each request updating one. THREADS_WARM=other warms on other keys
# (warm:…) instead, as this script did before: the measured run then fills
# a new keyspace while the warm-up's million keys expire and are swept
# (the cold figure; bench/RESULTS.md has both).
set -euo pipefail
NAME=threads HOST=127.0.0.1
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh

rounds=${1:-3} n1=${2:-400000} n16=${3:-2000000}
bin=$tmp/cellserver
go build -o "$bin" ./cmd/cellserver


# run PORT P N CMD...: one redis-benchmark run's requests per second.
run() {
	local port=$1 p=$2 n=$3
	shift 3
	redis-benchmark -p "$port" -c 50 -r 1000000 -n "$n" -P "$p" -q "$@" 2>&1 | tr '\r' '\n' | rps
}

# serve ARGS...: start a server on a free port, set port to it, and wait
# for it to answer.
serve() {
	port=$(free_port 7460)
	"$@" --port "$port" >/dev/null 2>&1 &
	pids+=($!)
	for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
}

stop() { redis-cli -p "$1" SHUTDOWN NOSAVE >/dev/null 2>&1 || true; sleep 0.3; }

declare -A ratios
for r in $(seq "$rounds"); do
	for p in 1 16; do
		n=$n1
		[[ $p == 16 ]] && n=$n16
		serve redis-server --save '' --appendonly no
		ping=$(run "$port" "$p" "$n" PING)
		stop "$port"
		printf 'round %d -P %-2d redis PING            %10.0f\n' "$r" "$p" "$ping"
		for t in 1 2 0; do
			serve "$bin" --threads "$t" --loglevel warning
			# Long enough (3-5 s) for the default to have measured the load twice.
			warm=$((p == 1 ? n / 2 : 2 * n))
			prefix=user
			[[ ${THREADS_WARM:-same} == other ]] && prefix=warm
			run "$port" "$p" "$warm" CL.THROTTLE "$prefix:__rand_int__" 15 30 60 >/dev/null
			got=$(run "$port" "$p" "$n" CL.THROTTLE user:__rand_int__ 15 30 60)
			used=$(redis-cli -p "$port" INFO server | tr -d '\r' | awk -F: '$1 == "threads" {print $2}')
			stop "$port"
			ratio=$(awk -v a="$got" -v b="$ping" 'BEGIN {printf "%.3f", a / b}')
			ratios[$p,$t]+="$ratio "
			printf 'round %d -P %-2d threads %s (ran %s)  %10.0f  %s x PING\n' "$r" "$p" "$t" "$used" "$got" "$ratio"
		done
	done
done
for p in 1 16; do
	for t in 1 2 0; do
		printf -- '-P %-2d threads %s: median %s x Redis PING [%s]\n' "$p" "$t" "$(median <<<"${ratios[$p,$t]}")" "${ratios[$p,$t]% }"
	done
done

#!/usr/bin/env bash
# bench/ab.sh — two cellserver builds, A and B, in alternating redis-benchmark runs.
#
#   bench/ab.sh BIN_A BIN_B [P] [N] [ROUNDS] [command...]
#
# Starts both binaries (--threads 1, ports 7411 and 7412, which must be free),
# then runs ROUNDS rounds [6] of: FLUSHALL, redis-benchmark -c 50 -r 1000000
# -n N [2000000] -P P [16] <command> [CL.THROTTLE user:__rand_int__ 15 30 60]
# against A, then the same against B. Each line shows ops/s and the server's
# CPU time per request (user + system, all its threads, from /proc/PID/stat),
# and the last line their means. On a noisy machine, the CPU per request of
# alternating runs is the steadier comparison.
#
# AB_ARGS_A and AB_ARGS_B add settings to one side (for one binary run two
# ways, e.g. AB_ARGS_B="--metrics-addr 127.0.0.1:9187"); AB_SCRAPE=URL
# fetches that URL every AB_SCRAPE_EVERY seconds [1] while the rounds run,
# as Prometheus would.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,12p' "$0"; exit 2; }
a=$1 b=$2 p=${3:-16} n=${4:-2000000} rounds=${5:-6}
shift $(( $# < 5 ? $# : 5 ))
cmd=("$@")
[[ ${#cmd[@]} -gt 0 ]] || cmd=(CL.THROTTLE user:__rand_int__ 15 30 60)
for port in 7411 7412; do
	if redis-cli -p "$port" PING >/dev/null 2>&1; then
		echo "ab.sh: port $port is in use" >&2
		exit 1
	fi
done
# shellcheck disable=SC2086 # the extra settings split into words
"$a" --port 7411 --threads 1 --loglevel warning ${AB_ARGS_A:-} >/dev/null 2>&1 & pa=$!
# shellcheck disable=SC2086
"$b" --port 7412 --threads 1 --loglevel warning ${AB_ARGS_B:-} >/dev/null 2>&1 & pb=$!
ps=""
if [[ -n ${AB_SCRAPE:-} ]]; then
	(end=$((SECONDS + 7200)); while ((SECONDS < end)); do curl -s -o /dev/null "$AB_SCRAPE" || true; sleep "${AB_SCRAPE_EVERY:-1}"; done) & ps=$!
fi
trap 'kill $pa $pb $ps 2>/dev/null; wait 2>/dev/null' EXIT
for port in 7411 7412; do
	for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
run() { # port pid -> "ops/s ns/request"
	redis-cli -p "$1" FLUSHALL >/dev/null
	local t0 t1 ops
	t0=$(ticks "$2")
	ops=$(redis-benchmark -p "$1" -c 50 -r 1000000 -n "$n" -P "$p" --csv "${cmd[@]}" | tail -1 | cut -d, -f2 | tr -d '"')
	t1=$(ticks "$2")
	echo "$ops $(( (t1 - t0) * 1000000000 / hz / n ))"
}
for r in $(seq "$rounds"); do
	read -r oa ca <<<"$(run 7411 $pa)"
	read -r ob cb <<<"$(run 7412 $pb)"
	printf 'round %d  A %10.0f ops/s %6d ns  B %10.0f ops/s %6d ns\n' "$r" "$oa" "$ca" "$ob" "$cb"
done | awk '{print; a += $4; ca += $6; b += $9; cb += $11; k++}
	END {printf "mean     A %10.0f ops/s %6.0f ns  B %10.0f ops/s %6.0f ns\n", a/k, ca/k, b/k, cb/k}'

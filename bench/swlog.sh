#!/usr/bin/env bash
# bench/swlog.sh — issue 14's SW.HIT EXACT repro: batches of 5000 pipelined
# hits on one key as its log grows, for one or more cellserver builds.
#
#   bench/swlog.sh BIN [BIN...]
#
# For each round [ROUNDS=2] and each BIN in turn: starts BIN (port 7421,
# which must be free), runs 7 batches of redis-benchmark -c 1 -P 50 -n 5000
# SW.HIT swlog 100000 3600 EXACT (so the log holds 0-5k, 5-10k, …, 30-35k
# hits before each), and prints each batch's seconds (redis-benchmark's
# start-up included) and the server's CPU ms for the batch (user + system,
# from /proc/PID/stat), then stops BIN.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,12p' "$0"; exit 2; }
port=7421
if redis-cli -p "$port" PING >/dev/null 2>&1; then
	echo "swlog.sh: port $port is in use" >&2
	exit 1
fi
tick=$(getconf CLK_TCK)
cpu_ms() { awk -v t="$tick" '{ print int(($14 + $15) * 1000 / t) }' "/proc/$1/stat"; }
pid=
trap '[[ -n $pid ]] && kill $pid 2>/dev/null; wait 2>/dev/null' EXIT
for round in $(seq "${ROUNDS:-2}"); do
	for bin in "$@"; do
		"$bin" --port "$port" --threads 1 --loglevel warning >/dev/null 2>&1 & pid=$!
		for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
		line="round $round $(basename "$bin"):"
		for batch in 0 1 2 3 4 5 6; do
			c0=$(cpu_ms "$pid") s=$(date +%s%N)
			redis-benchmark -p "$port" -c 1 -P 50 -n 5000 -q SW.HIT swlog 100000 3600 EXACT >/dev/null
			e=$(date +%s%N) c1=$(cpu_ms "$pid")
			line+=" $(( batch * 5 ))-$(( batch * 5 + 5 ))k $(awk -v d=$(( e - s )) 'BEGIN { printf "%.3f", d / 1e9 }') s ($(( c1 - c0 )) ms CPU);"
		done
		echo "$line"
		kill "$pid"
		wait "$pid" 2>/dev/null || true
		pid=
	done
done

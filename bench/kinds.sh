#!/usr/bin/env bash
# bench/kinds.sh — the limiters side by side at -P 16, against
# CL.THROTTLE and PING in the same round.
#
#   bench/kinds.sh [ROUNDS] [N]
#
# One server (--threads 1), ROUNDS rounds [3] of, for each workload in turn:
# FLUSHALL, a warm-up of N requests [2000000] on the workload's own keys,
# then the measured run of N requests on the same keys (redis-benchmark -c
# 50 -r 1000000 -P 16), so that every workload is measured on its keyspace
# in its steady state rather than while filling it. KINDS_WARM=none skips
# the warm-up (each run then fills its keyspace from empty: the cold
# figure). Prints each run's requests/s and its ratio to CL.THROTTLE in the
# same round, and the median ratio per workload.
#
# The parameters give every kind the same rate, 30 per 60 s with a burst
# of 16 where the kind has one, as bench/run.sh does:
#   CL.THROTTLE k 15 30 60, TB.TAKE k 16 30 60, SW.HIT k 30 60,
#   FW.INCR k 30 60, SW.HIT k 100 60 EXACT (the sliding log), and
#   LB.QUEUE k 16 30 60 (the leaky queue: 16 places, 30 leave per 60 s).
# At this rate a key of TB.TAKE or CL.THROTTLE lives a few seconds after
# its last request, the windows' keys a minute or two, and a sliding log
# holds every hit of its last minute (about one a second per key here).
set -euo pipefail
NAME=kinds HOST=127.0.0.1
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh

rounds=${1:-3} n=${2:-2000000}
bin=$tmp/cellserver
go build -o "$bin" ./cmd/cellserver

port=$(free_port 7470)
"$bin" --port "$port" --threads 1 --loglevel warning >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done

run() { redis-benchmark -p "$port" -c 50 -r 1000000 -n "$1" -P 16 -q "${@:2}" 2>&1 | tr '\r' '\n' | rps; }

names=("CL.THROTTLE" "TB.TAKE" "SW.HIT" "FW.INCR" "SW.HIT EXACT" "LB.QUEUE" "PING")
cmds=("CL.THROTTLE cl:__rand_int__ 15 30 60" "TB.TAKE tb:__rand_int__ 16 30 60" "SW.HIT sw:__rand_int__ 30 60"
	"FW.INCR fw:__rand_int__ 30 60" "SW.HIT sx:__rand_int__ 100 60 EXACT" "LB.QUEUE lb:__rand_int__ 16 30 60" "PING")
declare -A ratios
for r in $(seq "$rounds"); do
	line="round $r (load $(cut -d' ' -f1 /proc/loadavg)):"
	base=
	for i in "${!cmds[@]}"; do
		redis-cli -p "$port" FLUSHALL >/dev/null
		# shellcheck disable=SC2086 # the command splits into words
		[[ ${KINDS_WARM:-same} == none ]] || run "$n" ${cmds[$i]} >/dev/null
		# shellcheck disable=SC2086
		got=$(run "$n" ${cmds[$i]})
		[[ -n $base ]] || base=$got
		ratio=$(awk -v a="$got" -v b="$base" 'BEGIN {printf "%.2f", a / b}')
		ratios[$i]+="$ratio "
		line+=" ${names[$i]} $got ($ratio)"
	done
	echo "$line"
done
for i in "${!cmds[@]}"; do
	printf '%-13s median %s of CL.THROTTLE [%s]\n' "${names[$i]}" "$(median <<<"${ratios[$i]}")" "${ratios[$i]% }"
done

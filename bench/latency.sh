#!/usr/bin/env bash
# bench/latency.sh — where a slow non-pipelined request spends its time.
#
#   bench/latency.sh [BIN] [N] [ROUNDS] [THREADS...]
#
# For each THREADS value [1 0] (0: sized while running, the default),
# ROUNDS rounds [3] of: start BIN [a fresh build of cmd/cellserver] with
# that --threads and the metrics endpoint, warm it up for a few seconds
# (so that the default has sized itself), run redis-benchmark -c 50 -n N
# [200000] -r 1000000 (no pipelining) on CL.THROTTLE, and print one line:
#
#   - the client's view: requests/s, p50, p99 and max latency (ms);
#   - the Go runtime's: how many times a runnable goroutine waited more than
#     0.9 ms and more than 10.5 ms for a thread (go_sched_latencies_seconds),
#     and the longest stop-the-world pause bucket (GC or other);
#   - the kernel's: how long the server's threads waited, runnable, on a
#     run queue (/proc/PID/task/*/schedstat, second field), in total and
#     per request, while redis-benchmark ran on the same cores.
#
# A request slower than every Go-side figure was held up outside the Go
# runtime: by the kernel's scheduler (run-queue waits) or the network.
#
# A THREADS value of "redis" runs redis-server instead, with PING (-t
# ping_mbulk) and the same warm-up, as the machine's floor in the same
# round: only the client's view and the run-queue figures are printed for
# it. Each round runs every THREADS value in turn.
set -euo pipefail
NAME=latency HOST=127.0.0.1
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh

bin=${1:-}
n=${2:-200000}
rounds=${3:-3}
shift $(($# < 3 ? $# : 3))
threads=("$@")
[[ ${#threads[@]} -gt 0 ]] || threads=(1 0)
if [[ -z $bin ]]; then
	bin=$tmp/cellserver
	go build -o "$bin" ./cmd/cellserver
fi

# runq_ns PID: nanoseconds PID's threads have spent waiting on a run queue.
runq_ns() {
	local sum=0 f
	for f in /proc/"$1"/task/*/schedstat; do
		read -r _ wait _ <"$f" 2>/dev/null || continue
		sum=$((sum + wait))
	done
	echo "$sum"
}

# bucket METRICS NAME LE: the cumulative count of histogram NAME at bucket LE.
bucket() { awk -v n="$2_bucket{le=\"$3\"}" '$1 == n {print $2}' <<<"$1"; }
# over METRICS NAME LE: how many observations of NAME exceeded bucket LE.
over() {
	local total le
	total=$(bucket "$1" "$2" "+Inf")
	le=$(awk -v n="$2_bucket{le=\"" 'index($1, n) == 1 {print $1}' <<<"$1" |
		sed 's/.*le="\([^"]*\)".*/\1/' | awk -v t="$3" '$1 + 0 >= t {print; exit}')
	echo $((${total%.*} - $(bucket "$1" "$2" "$le" | cut -d. -f1)))
}

printf '%-7s %-5s %9s %6s %6s %7s %10s %10s %12s %10s %10s\n' threads round 'req/s' p50 p99 max \
	'wait>0.9ms' 'wait>10ms' 'stw>0.9ms' 'runq ms' 'runq/req'
for r in $(seq "$rounds"); do
	for t in "${threads[@]}"; do
		port=$(free_port 7440)
		mport=$(free_port 9190)
		if [[ $t == redis ]]; then
			redis-server --port "$port" --bind "$HOST" --save "" --appendonly no --loglevel warning >"$tmp/server.log" 2>&1 &
		else
			"$bin" --port "$port" --threads "$t" --loglevel warning --metrics-addr "$HOST:$mport" >"$tmp/server.log" 2>&1 &
		fi
		pid=$!
		pids+=("$pid")
		for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
		if [[ $t == redis ]]; then
			redis-benchmark -p "$port" -c 50 -n $((n / 2 + 150000)) -t ping_mbulk >/dev/null 2>&1
			q0=$(runq_ns "$pid")
			out=$(redis-benchmark -p "$port" -c 50 -n "$n" -t ping_mbulk 2>&1 | tr '\r' '\n')
			q1=$(runq_ns "$pid")
			kill "$pid"
			wait "$pid" 2>/dev/null || true
			rps=$(grep -m1 'requests per second' <<<"$out" | sed 's/.*: \([0-9.]*\) requests.*/\1/')
			read -r _ _ p50 _ p99 max < <(grep -A2 'latency summary' <<<"$out" | tail -1)
			printf '%-7s %-5s %9s %6s %6s %7s %10s %10s %12s %10s %8s ns\n' "$t" "$r" "$rps" "$p50" "$p99" "$max" \
				- - - $(((q1 - q0) / 1000000)) $(((q1 - q0) / n))
			continue
		fi
		# A warm-up of 3-4 s, in which the default (0) measures the load,
		# on the measured run's keys: the run sees the keyspace in its
		# steady state (LATENCY_WARM=other: on other keys, which then
		# expire while the run fills its own, as bench/threads.sh explains).
		prefix=user
		[[ ${LATENCY_WARM:-same} == other ]] && prefix=warm
		redis-benchmark -p "$port" -c 50 -n $((n / 2 + 150000)) -r 1000000 CL.THROTTLE "$prefix:__rand_int__" 15 30 60 >/dev/null 2>&1
		m0=$(curl -s "http://$HOST:$mport/metrics")
		q0=$(runq_ns "$pid")
		out=$(redis-benchmark -p "$port" -c 50 -n "$n" -r 1000000 CL.THROTTLE user:__rand_int__ 15 30 60 2>&1 | tr '\r' '\n')
		q1=$(runq_ns "$pid")
		m1=$(curl -s "http://$HOST:$mport/metrics")
		kill "$pid"
		wait "$pid" 2>/dev/null || true
		rps=$(grep -m1 'requests per second' <<<"$out" | sed 's/.*: \([0-9.]*\) requests.*/\1/')
		# "avg min p50 p95 p99 max" under "latency summary (msec):"
		read -r _ _ p50 _ p99 max < <(grep -A2 'latency summary' <<<"$out" | tail -1)
		w1=$(($(over "$m1" go_sched_latencies_seconds 0.0009) - $(over "$m0" go_sched_latencies_seconds 0.0009)))
		w10=$(($(over "$m1" go_sched_latencies_seconds 0.0104) - $(over "$m0" go_sched_latencies_seconds 0.0104)))
		s1=$((
			$(over "$m1" go_sched_pauses_total_gc_seconds 0.0009) - $(over "$m0" go_sched_pauses_total_gc_seconds 0.0009) +
			$(over "$m1" go_sched_pauses_total_other_seconds 0.0009) - $(over "$m0" go_sched_pauses_total_other_seconds 0.0009)
		))
		rq=$(((q1 - q0) / 1000000))
		printf '%-7s %-5s %9s %6s %6s %7s %10s %10s %12s %10s %8s ns\n' "$t" "$r" "$rps" "$p50" "$p99" "$max" \
			"$w1" "$w10" "$s1" "$rq" $(((q1 - q0) / n))
	done
done

#!/usr/bin/env bash
# bench/repl.sh — a primary's throughput with one replica attached against
# none, in one run, the replica's apply delay under that load, and the
# time of a full copy of 1M keys.
#
#   bench/repl.sh [ROUNDS]      (default 3)
#
# Starts a primary (--threads 1) and a replica on 127.0.0.1, fills the
# primary with 1M CL.THROTTLE keys (key:000000000000 on, through
# redis-cli --pipe), then per round runs redis-benchmark
# -c 50 -r 1000000 -P 16 -n BENCH_N (default 2M) CL.THROTTLE against the
# primary first alone (the replica REPLICAOF NO ONE) and then with the
# replica attached (REPLICAOF, after its full copy of the 1M keys). It
# prints each round's requests/s both ways and their ratio, the primary's
# processor time per request both ways and their ratio (alone / with:
# the throughput ratio a primary with its own cores would see), the replica's
# apply delay p50/p99 during the run with it (from the growth of its
# /metrics histogram over the run; bucket bounds, and an upper bound of
# the delay), and each full copy's log line (keys, bytes, time).
set -euo pipefail
NAME=repl HOST=127.0.0.1
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
rounds=${1:-3}
N=${BENCH_N:-2000000}
bin=$tmp/cellserver
go build -o "$bin" ./cmd/cellserver
pp=$(free_port 7401); rp=$(free_port $((pp + 1))); mp=$(free_port $((rp + 1)))
"$bin" --port "$pp" --loglevel notice --threads 1 >"$tmp/primary.log" 2>&1 & pids+=($!)
ppid=$!
"$bin" --port "$rp" --loglevel notice --metrics-addr "$HOST:$mp" >"$tmp/replica.log" 2>&1 & pids+=($!)
rpid=$!
for _ in $(seq 100); do redis-cli -p "$pp" ping >/dev/null 2>&1 && redis-cli -p "$rp" ping >/dev/null 2>&1 && break; sleep 0.1; done
log "filling 1M keys"
# key:000000000000 … key:000000999999, the names redis-benchmark -r 1000000 draws.
awk 'BEGIN { for (i = 0; i < 1000000; i++) { k = sprintf("key:%012d", i); printf "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$2\r\n15\r\n$2\r\n30\r\n$4\r\n3600\r\n", length(k), k } }' |
	redis-cli -p "$pp" --pipe >/dev/null
keys=$(redis-cli -p "$pp" dbsize)
log "primary holds $keys keys"
attach() {
	redis-cli -p "$rp" replicaof $HOST "$pp" >/dev/null
	for _ in $(seq 600); do
		[[ $(redis-cli -p "$rp" info replication | tr -d '\r' | grep '^master_link_status:') == master_link_status:up ]] && return
		sleep 0.1
	done
	echo "bench/repl: the replica did not sync" >&2; exit 1
}
# bench: one run; prints its requests/s and the primary's processor time
# per request in µs (user + system, from /proc), which, unlike requests/s,
# does not depend on what else the machine runs (the replica, the
# benchmark, other work on a shared machine).
ticks() { awk '{print $14 + $15}' "/proc/${1:-$ppid}/stat"; }
bench() {
	local t0 t1 r
	t0=$(ticks)
	r=$(redis-benchmark -h $HOST -p "$pp" -c 50 -r 1000000 -P 16 -n "$N" -q CL.THROTTLE key:__rand_int__ 15 30 3600 2>/dev/null | rps)
	t1=$(ticks)
	echo "$r $(awk -v d=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v n="$N" 'BEGIN {printf "%.3f", d / hz / n * 1e6}')"
}
# buckets: the replica's apply delay histogram, "le count" per line.
buckets() {
	curl -s "http://$HOST:$mp/metrics" | awk '/^cellserver_replication_apply_delay_seconds_bucket/ {
		split($1, a, "le=\""); le = a[2]; sub(/".*/, "", le); print le, $2 }'
}
for r in $(seq "$rounds"); do
	redis-cli -p "$rp" replicaof no one >/dev/null
	read -r alone acpu < <(bench)
	attach
	redis-cli -p "$pp" wait 1 10000 >/dev/null # caught up with the stream of the copy's time
	buckets >"$tmp/before"
	r0=$(ticks "$rpid")
	read -r with wcpu < <(bench)
	r1=$(ticks "$rpid")
	buckets >"$tmp/after"
	echo "  replica: $(awk -v d=$((r1 - r0)) -v hz="$(getconf CLK_TCK)" -v n="$N" 'BEGIN {printf "%.3f", d / hz / n * 1e6}') µs CPU per request served by the primary"
	echo "round $r: alone $alone req/s ($acpu µs CPU/req), with a replica $with req/s ($wcpu µs CPU/req); throughput ratio $(awk -v a="$alone" -v b="$with" 'BEGIN {printf "%.3f", b / a}'), CPU-per-request ratio $(awk -v a="$acpu" -v b="$wcpu" 'BEGIN {printf "%.3f", a / b}')"
	# The delay of the batches applied during the run with the replica:
	# the histogram's growth over it (the full copy's catch-up left out).
	paste "$tmp/before" "$tmp/after" | awk '{ b[NR] = $1; c[NR] = $4 - $2 } END { total = c[NR]; p50 = ""; p99 = "";
		for (i = 1; i <= NR; i++) { if (p50 == "" && c[i] >= 0.5 * total) p50 = b[i]; if (p99 == "" && c[i] >= 0.99 * total) p99 = b[i] }
		printf "  apply delay over %d batches: p50 <= %s s, p99 <= %s s\n", total, p50, p99 }'
done
grep -o 'Full copy to replica.*' "$tmp/primary.log" | head -"$rounds"

#!/usr/bin/env bash
# bench/repl.sh — a primary's throughput with one replica attached against
# none, in one run, the replica's apply delay under that load, and the
# time of a full copy of 1M keys.
#
#   bench/repl.sh [ROUNDS]      (default 3)
#
# Starts a primary (--threads 1) and a replica on 127.0.0.1, fills the
# primary with 1M CL.THROTTLE keys, then per round runs redis-benchmark
# -c 50 -r 1000000 -P 16 -n BENCH_N (default 2M) CL.THROTTLE against the
# primary first alone (the replica REPLICAOF NO ONE) and then with the
# replica attached (REPLICAOF, after its full copy). It prints each
# round's requests/s both ways and their ratio, the full copy's log line
# (keys, bytes, time) and the replica's apply delay p50/p99 from its
# /metrics histogram (bucket bounds: an upper bound of the delay).
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
"$bin" --port "$rp" --loglevel notice --metrics-addr "$HOST:$mp" >"$tmp/replica.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do redis-cli -p "$pp" ping >/dev/null 2>&1 && redis-cli -p "$rp" ping >/dev/null 2>&1 && break; sleep 0.1; done
log "filling 1M keys"
redis-benchmark -h $HOST -p "$pp" -c 50 -P 64 -n 1000000 -r 1000000 -q CL.THROTTLE key:__rand_int__ 15 30 3600 >/dev/null 2>&1 || true
# -r draws with repeats: count what is there.
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
bench() { redis-benchmark -h $HOST -p "$pp" -c 50 -r 1000000 -P 16 -n "$N" -q CL.THROTTLE key:__rand_int__ 15 30 3600 2>/dev/null | rps; }
for r in $(seq "$rounds"); do
	redis-cli -p "$rp" replicaof no one >/dev/null
	alone=$(bench)
	attach
	with=$(bench)
	echo "round $r: alone $alone req/s, with a replica $with req/s, ratio $(awk -v a="$alone" -v b="$with" 'BEGIN {printf "%.3f", b / a}')"
done
grep -o 'Full copy to replica.*' "$tmp/primary.log" | head -1
curl -s "http://$HOST:$mp/metrics" | awk '
	/^cellserver_replication_apply_delay_seconds_bucket/ { split($1, a, "le=\""); le = a[2]; sub(/".*/, "", le); b[++n] = le; c[n] = $2 }
	END { total = c[n]; p50 = ""; p99 = "";
		for (i = 1; i <= n; i++) { if (p50 == "" && c[i] >= 0.5 * total) p50 = b[i]; if (p99 == "" && c[i] >= 0.99 * total) p99 = b[i] }
		printf "apply delay over %d batches: p50 <= %s s, p99 <= %s s\n", total, p50, p99 }'

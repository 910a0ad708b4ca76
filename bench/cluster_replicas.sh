#!/usr/bin/env bash
# bench/cluster_replicas.sh — what cluster replicas cost and what they buy,
# in one run:
#
#   bench/cluster_replicas.sh [ROUNDS, 3] [REQUESTS per run, 1000000]
#
# 1. Throughput: two three-node clusters on 127.0.0.1, one with
#    cluster-replicas 0 and one with 1, both up at once; per round
#    redis-benchmark --cluster -c 50 -P BENCH_PIPELINE (16) -r 100000
#    FW.INCR on random keys against each (odd rounds the first first,
#    even rounds the second first). It prints each run's requests/s and
#    the processor time (user + system, /proc/<pid>/stat) the cluster's
#    three nodes spent per request, and the ratios (with replicas over
#    without for requests/s; without over with for processor time: the
#    throughput ratio nodes with cores of their own would see, where here
#    the nodes and the load generator share this machine's cores), and
#    the medians over the rounds; and, first, the processor time each
#    cluster's nodes spend idle over 5 s.
# 2. Replication delay under load, and kill-to-serving through go-redis's
#    ClusterClient with cluster-replicas 1 and 0 (the Go benchmarks
#    BenchmarkClusterReplicaDelay and BenchmarkClusterReplicaKill in
#    bench/cluster_replicas_test.go; BENCH_KILL_RUNS runs each, 3);
#    BENCH_SKIP_GO=1 leaves this part out.
#
# Every node runs with cluster-node-timeout BENCH_NODE_TIMEOUT (2000 ms).
set -euo pipefail
NAME=replicas HOST=127.0.0.1
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
rounds=${1:-3}
N=${2:-1000000}
P=${BENCH_PIPELINE:-16}
export BENCH_NODE_TIMEOUT=${BENCH_NODE_TIMEOUT:-2000}
bin=$tmp/cellserver
go build -o "$bin" ./cmd/cellserver
printf 'cluster-enabled yes\ncluster-secret %s\n' "$(head -c 24 /dev/urandom | base64)" >"$tmp/cluster.conf"
chmod 600 "$tmp/cluster.conf"

# cluster R FIRSTPORT: three nodes with cluster-replicas R from FIRSTPORT
# on (their gossip ports 10000 above), noted in pidsOf, portOf (the
# first's port) and portsOf.
declare -A pidsOf portOf portsOf
cluster() {
	local r=$1 p=$2 first=""
	for i in 0 1 2; do
		local port
		port=$(free_port $((p + i)))
		local join=()
		[[ -n $first ]] && join=(--cluster-join "$HOST:$first")
		"$bin" "$tmp/cluster.conf" --port "$port" --loglevel warning --cluster-replicas "$r" \
			--cluster-node-timeout "$BENCH_NODE_TIMEOUT" "${join[@]}" >"$tmp/r$r-$port.log" 2>&1 &
		pids+=($!)
		pidsOf[$r]+="$! "
		portsOf[$r]+="$port "
		[[ -z $first ]] && first=$port && portOf[$r]=$port
		for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
	done
}
# ready R: waits until the cluster of R answers cluster_state:ok with three
# members owning slots and, with replicas, no node syncs replica slots
# still (INFO cluster's cluster_replica_slots_syncing).
ready() {
	local r=$1
	for _ in $(seq 300); do
		local ok=0
		for p in ${portsOf[$r]}; do
			local info
			info=$(redis-cli -p "$p" info cluster | tr -d '\r')$'\n'$(redis-cli -p "$p" cluster info | tr -d '\r')
			if grep -q '^cluster_state:ok' <<<"$info" && grep -q '^cluster_size:3' <<<"$info" &&
				{ [[ $r == 0 ]] || grep -q '^cluster_replica_slots_syncing:0' <<<"$info"; }; then
				ok=$((ok + 1))
			fi
		done
		[[ $ok == 3 ]] && return
		sleep 0.1
	done
	echo "bench/cluster_replicas: the cluster with cluster-replicas $r did not settle" >&2
	exit 1
}
cluster 0 7340
cluster 1 7350
ready 0
ready 1
log "clusters up: cluster-replicas 0 from port ${portOf[0]}, 1 from ${portOf[1]}"

ticks() { local s=0; for p in $1; do s=$((s + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$s"; }
bench() { # R: prints requests/s and µs of the nodes' CPU per request
	local t0 t1 rps_
	t0=$(ticks "${pidsOf[$1]}")
	rps_=$(redis-benchmark --cluster -p "${portOf[$1]}" -c 50 -P "$P" -r 100000 -n "$N" -q \
		FW.INCR '{tag}:__rand_int__' 1000000000 3600 2>/dev/null | tr '\r' '\n' | rps)
	t1=$(ticks "${pidsOf[$1]}")
	echo "$rps_ $(awk -v d=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v n="$N" 'BEGIN {printf "%.3f", d / hz / n * 1e6}')"
}
# What each cluster's nodes spend idle, over 5 s.
i0=$(ticks "${pidsOf[0]}") i1=$(ticks "${pidsOf[1]}")
sleep 5
i0=$(($(ticks "${pidsOf[0]}") - i0)) i1=$(($(ticks "${pidsOf[1]}") - i1))
log "idle, the three nodes together: $(awk -v a=$i0 -v b=$i1 -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f%% of a core without replicas, %.1f%% with", a / hz / 5 * 100, b / hz / 5 * 100}')"
echo "| round | replicas 0 req/s | replicas 1 req/s | req/s ratio (1/0) | CPU µs/req, 0 | CPU µs/req, 1 | CPU ratio (0/1) |"
echo "|---|---|---|---|---|---|---|"
rr=() cr=()
for r in $(seq "$rounds"); do
	# Odd rounds run without replicas first, even rounds with.
	if ((r % 2)); then
		read -r r0 c0 < <(bench 0)
		read -r r1 c1 < <(bench 1)
	else
		read -r r1 c1 < <(bench 1)
		read -r r0 c0 < <(bench 0)
	fi
	ratio=$(awk -v a="$r0" -v b="$r1" 'BEGIN {printf "%.2f", b / a}')
	cratio=$(awk -v a="$c0" -v b="$c1" 'BEGIN {printf "%.2f", a / b}')
	rr+=("$ratio") cr+=("$cratio")
	echo "| $r | $r0 | $r1 | $ratio | $c0 | $c1 | $cratio |"
done
echo "| median | | | $(echo "${rr[@]}" | median) | | | $(echo "${cr[@]}" | median) |"
for r in 0 1; do
	for p in ${pidsOf[$r]}; do kill "$p" 2>/dev/null || true; done
done
log "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
[[ -n ${BENCH_SKIP_GO:-} ]] || go test -run xxx -bench 'ClusterReplica(Delay|Kill)' -benchtime 1x ./bench/ 2>&1 | grep -E '^(Benchmark|ok|FAIL|---)|_test.go'

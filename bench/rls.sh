#!/usr/bin/env bash
# bench/rls.sh — Envoy's ShouldRateLimit: cellserver against envoyproxy/ratelimit with Redis.
#
#   bench/rls.sh [ROUNDS] [SECONDS] [STREAMS] [VALUES]
#
# Builds cmd/cellserver, bench/rlsload and envoyproxy/ratelimit's service_cmd
# (the Go module at RLS_VERSION, from the module proxy, in a module of its
# own under the scratch directory: never in this repository's go.mod), and
# starts on loopback: redis-server, envoyproxy/ratelimit behind it
# (USE_STATSD=false, REDIS_SOCKET_TYPE=tcp, its config file from
# RUNTIME_ROOT), and cellserver with --grpc-port and --threads one per core
# (what Go gives envoyproxy/ratelimit; threads 0 would size itself down
# beside the load generator), given the same configuration with RULES SET. Then ROUNDS rounds [3] of rlsload against
# envoyproxy/ratelimit, then against cellserver: STREAMS concurrent callers
# [64] over 4 connections for SECONDS [5], each call one descriptor
# user=valueN of VALUES [10000] values, a limit of 100 a second each. Each
# line shows decisions/s, p50 and p99, and the server side's CPU time per
# decision (envoyproxy/ratelimit's and Redis's together; all threads, from
# /proc/PID/stat): on a busy machine the steadier figure. The last lines
# are the medians and the ratios. RLS_BIN names a service_cmd already
# built, to skip its build; CELL_BIN a cellserver binary to run in place of
# a build of this tree. RLS_LOAD=h2load drives both with h2load instead of
# rlsload (below).
set -euo pipefail
NAME=rls HOST=127.0.0.1
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh

rounds=${1:-3} secs=${2:-5} streams=${3:-64} values=${4:-10000}
RLS_VERSION=${RLS_VERSION:-v1.4.1-0.20260122083618-3fb702589d36}
command -v redis-server >/dev/null || { echo "bench/rls.sh: redis-server is not installed" >&2; exit 1; }

log "building cellserver and rlsload"
cell=${CELL_BIN:-$tmp/cellserver}
[[ -n ${CELL_BIN:-} ]] || go build -o "$cell" ./cmd/cellserver
go build -o "$tmp/rlsload" ./bench/rlsload
rls=${RLS_BIN:-}
if [[ -z $rls ]]; then
	log "building envoyproxy/ratelimit $RLS_VERSION in a module of its own"
	(cd "$tmp" && GOBIN=$tmp/bin GOFLAGS=-mod=mod go install "github.com/envoyproxy/ratelimit/src/service_cmd@$RLS_VERSION")
	rls=$tmp/bin/service_cmd
fi

# The one configuration both services run.
mkdir -p "$tmp/runtime/ratelimit/config"
cat >"$tmp/runtime/ratelimit/config/bench.yaml" <<'EOF'
domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 100
EOF

# RLS_PIN=1 runs the services on the last processor and the load
# generator on the others (taskset), so that each service has one
# processor of its own and the load generator's cost is not theirs.
srvpin= loadpin= threads=$(nproc)
if [[ ${RLS_PIN:-} == 1 ]]; then
	last=$(($(nproc) - 1))
	((last > 0)) || { echo "bench/rls.sh: RLS_PIN needs two processors" >&2; exit 1; }
	srvpin="taskset -c $last" loadpin="taskset -c 0-$((last - 1))" threads=1
fi

redis_port=$(free_port 7461)
$srvpin redis-server --port "$redis_port" --bind "$HOST" --save '' --appendonly no >"$tmp/redis.log" 2>&1 &
redis_pid=$!
pids+=($redis_pid)
http_port=$(free_port $((redis_port + 1)))
grpc_port=$(free_port $((http_port + 1)))
debug_port=$(free_port $((grpc_port + 1)))
env USE_STATSD=false REDIS_SOCKET_TYPE=tcp REDIS_URL="$HOST:$redis_port" \
	RUNTIME_ROOT="$tmp/runtime" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false \
	HOST=$HOST PORT="$http_port" GRPC_HOST=$HOST GRPC_PORT="$grpc_port" \
	DEBUG_HOST=$HOST DEBUG_PORT="$debug_port" LOG_LEVEL=warn $srvpin "$rls" >"$tmp/rls.log" 2>&1 &
rls_pid=$!
pids+=($rls_pid)
cell_port=$(free_port $((debug_port + 1)))
cell_grpc=$(free_port $((cell_port + 1)))
$srvpin "$cell" --port "$cell_port" --grpc-port "$cell_grpc" --threads "$threads" --loglevel warning >"$tmp/cell.log" 2>&1 &
cell_pid=$!
pids+=($cell_pid)
for _ in $(seq 100); do redis-cli -p "$cell_port" PING >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$cell_port" RULES SET bench "$(cat "$tmp/runtime/ratelimit/config/bench.yaml")" >/dev/null

load() { GOGC=400 $loadpin "$tmp/rlsload" -addr "$HOST:$1" -streams "$streams" -conns 4 -for "${secs}s" -domain bench -key user -values "$values"; }
if [[ ${RLS_LOAD:-} == h2load ]]; then
	# h2load (nghttp2-client), a load generator in C whose cost per call is
	# a fraction of grpc-go's, POSTs one gRPC frame, a request for
	# user=value0, over 4 connections of 16 streams each: one key, over its
	# limit after the first 100 calls of each second. Its line is recast as
	# rlsload's: h2load counts HTTP statuses, and gRPC's status travels in
	# trailers, so every answer is counted as ok.
	command -v h2load >/dev/null || { echo "bench/rls.sh: RLS_LOAD=h2load needs h2load (apt-get install nghttp2-client)" >&2; exit 1; }
	python3 - "$tmp/frame" <<'PY'
import struct, sys
def field(n, b): return bytes([n << 3 | 2, len(b)]) + b
entry = field(1, b"user") + field(2, b"value0")
msg = field(1, b"bench") + field(2, field(1, entry))
open(sys.argv[1], "wb").write(b"\0" + struct.pack(">I", len(msg)) + msg)
PY
	load() {
		$loadpin h2load -D "$secs" -c 4 -m 16 -t 1 -d "$tmp/frame" -H 'content-type: application/grpc' -H 'te: trailers' \
			"http://$HOST:$1/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" 2>&1 |
			awk '/^finished in/ {rps = $4} /succeeded,/ {ok = $8} /^time for request:/ {p = $6 " sd " $7}
				END {printf "decisions/s %.0f p50 - p99 - calls %d ok %d over 0 errors 0 mean %s\n", rps, ok, ok, p}'
	}
fi
# ticks PID...: the processes' CPU time (user + system), in clock ticks.
ticks() { local n=0 p; for p in "$@"; do n=$((n + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$n"; }
hz=$(getconf CLK_TCK)
# run PORT PID...: one rlsload run, and the server side's CPU time per
# decision (all of PID's threads) appended to its line.
run() {
	local port=$1 t0 t1 out n
	shift
	t0=$(ticks "$@")
	out=$(load "$port")
	t1=$(ticks "$@")
	n=$(awk '{print $10 + $12}' <<<"$out")
	echo "$out cpu/decision $(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$n" 'BEGIN {printf "%.1fus", n ? t * 1e6 / hz / n : 0}')"
}
# Both answer before the rounds start (the warm-up call of rlsload waits
# for a connection, not for a service still starting).
for p in "$grpc_port" "$cell_grpc"; do
	for _ in $(seq 100); do (exec 3<>"/dev/tcp/$HOST/$p") 2>/dev/null && break; sleep 0.1; done
done
for pid in "$redis_pid" "$rls_pid" "$cell_pid"; do
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "bench/rls.sh: a service did not start; its logs:" >&2
		tail -5 "$tmp/redis.log" "$tmp/rls.log" "$tmp/cell.log" >&2
		exit 1
	fi
done
log "rounds: $rounds x ${secs}s, $streams streams, $values values"
ra=() rb=() ca=() cb=()
for r in $(seq "$rounds"); do
	a=$(run "$grpc_port" "$rls_pid" "$redis_pid")
	b=$(run "$cell_grpc" "$cell_pid")
	echo "round $r envoyproxy/ratelimit+redis: $a"
	echo "round $r cellserver:                 $b"
	ra+=("$(awk '{print $2}' <<<"$a")")
	rb+=("$(awk '{print $2}' <<<"$b")")
	ca+=("$(awk '{sub("us", "", $NF); print $NF}' <<<"$a")")
	cb+=("$(awk '{sub("us", "", $NF); print $NF}' <<<"$b")")
done
ma=$(echo "${ra[*]}" | median) mb=$(echo "${rb[*]}" | median)
pa=$(echo "${ca[*]}" | median) pb=$(echo "${cb[*]}" | median)
echo "median decisions/s: envoyproxy/ratelimit+redis $ma, cellserver $mb, ratio $(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.2f", b / a}')x"
echo "median server CPU per decision: envoyproxy/ratelimit+redis ${pa}us, cellserver ${pb}us, ratio $(awk -v a="$pa" -v b="$pb" 'BEGIN {printf "%.2f", b ? a / b : 0}')x"

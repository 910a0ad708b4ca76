#!/usr/bin/env bash
# Cluster figures on one machine: a single node with cluster mode off and
# on, a three-node cluster driven by redis-benchmark --cluster, forwarding
# (a plain client on a cluster-forward node). Every node
# and the load generator share this machine's cores, so the cluster rows
# measure overheads, not scaling. Usage: bench/cluster.sh [requests]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200000}
BIN=$(mktemp -d)/cellserver
go build -o "$BIN" ./cmd/cellserver
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
start() { "$BIN" --loglevel warning "$@" & pids+=($!); }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return; sleep 0.1; done; echo "port $1 down" >&2; exit 1; }
bench() { # name, then redis-benchmark arguments
  local name=$1; shift
  local out
  out=$(redis-benchmark -n "$N" -c 50 -q "$@" 2>&1 | tr '\r' '\n' | grep "requests per second" | tail -1 || true)
  printf '| %s | %s |\n' "$name" "$(echo "$out" | sed 's/.*: //')"
}
echo "| run | result |"
echo "|---|---|"
start --port 7300; wait_port 7300
bench "1 node, cluster off" -p 7300 -r 100000 FW.INCR 'key:__rand_int__' 1000000 60
start --port 7301 --cluster-enabled yes --cluster-secret bench; wait_port 7301
bench "1 node, cluster on (serves every slot)" -p 7301 -r 100000 FW.INCR 'key:__rand_int__' 1000000 60
start --port 7310 --cluster-enabled yes --cluster-secret bench; wait_port 7310
start --port 7311 --cluster-enabled yes --cluster-secret bench --cluster-join 127.0.0.1:7310; wait_port 7311
start --port 7312 --cluster-enabled yes --cluster-secret bench --cluster-join 127.0.0.1:7310 --cluster-forward yes; wait_port 7312
sleep 2
bench "3 nodes, redis-benchmark --cluster" --cluster -p 7310 -r 100000 FW.INCR '{tag}:__rand_int__' 1000000 60
bench "3 nodes, plain client on a cluster-forward node (2/3 relayed)" -p 7312 -r 100000 FW.INCR 'key:__rand_int__' 1000000 60
# The cost of a -MOVED round trip and of forwarding is measured by
# BenchmarkClusterRoute (bench/cluster_bench_test.go): redis-benchmark exits at the first error reply.

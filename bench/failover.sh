#!/usr/bin/env bash
# bench/failover.sh — how long a failover by Redis Sentinel takes as a
# client sees it: kill-to-first-correct-reply for cellserver and, in the
# same run, redis-server (BenchmarkKillToFirstCorrectReply in
# bench/failover_bench_test.go: a primary, a replica and three Sentinels
# at down-after-milliseconds 1000 per run, a steady load through go-redis's
# FailoverClient, SIGKILL, the time to the first reply that still refuses
# a key limited before the kill).
#
#   bench/failover.sh [runs per server, 5]
#
# Needs redis-server and redis-sentinel (or redis-server --sentinel). Every
# process it starts is killed when each run ends.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_FAILOVER_RUNS=${1:-5} go test -run xxx -bench KillToFirstCorrectReply -benchtime 1x ./bench/ 2>&1 |
	grep -Ev '^redis: [0-9]{4}/' # go-redis's log of the failover

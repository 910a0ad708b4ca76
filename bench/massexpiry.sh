#!/usr/bin/env bash
# bench/massexpiry.sh — latency of other clients while a million keys expire at once.
#
#   bench/massexpiry.sh [BIN] [ROUNDS]
#
# Starts BIN (default: builds cmd/cellserver) with --threads 1 and DEBUG on port
# 7413 (which must be free). Each round [2]: FLUSHALL, fills the keyspace with
# redis-benchmark -P 16 CL.THROTTLE on 1M random keys (about 860k distinct),
# moves the clock two hours on (DEBUG CLOCK ADVANCE), and at once runs
# redis-benchmark -c 50 -n 2000000 -P 16 PING while the sweep reclaims them;
# then the same PING run again with nothing expiring. redis-benchmark's --csv
# line shows ops/s, then avg, min, p50, p95, p99 and max latency in ms.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-}
rounds=${2:-2}
port=7413
tmp=
if [[ -z $bin ]]; then
	tmp=$(mktemp -d)
	(cd "$here/.." && go build -o "$tmp/cellserver" ./cmd/cellserver)
	bin=$tmp/cellserver
fi
if redis-cli -p $port PING >/dev/null 2>&1; then
	echo "massexpiry.sh: port $port is in use" >&2
	exit 1
fi
"$bin" --port $port --threads 1 --loglevel warning --enable-debug-command yes >/dev/null 2>&1 & pid=$!
trap 'kill $pid 2>/dev/null; wait 2>/dev/null; [[ -z $tmp ]] || rm -rf "$tmp"' EXIT
for _ in $(seq 50); do redis-cli -p $port PING >/dev/null 2>&1 && break; sleep 0.1; done
for r in $(seq "$rounds"); do
	redis-cli -p $port FLUSHALL >/dev/null
	redis-benchmark -p $port -c 50 -r 1000000 -n 2000000 -P 16 -q CL.THROTTLE user:__rand_int__ 15 30 60 >/dev/null
	keys=$(redis-cli -p $port DBSIZE)
	redis-cli -p $port DEBUG CLOCK ADVANCE 7200000000000 >/dev/null
	echo "round $r, $keys keys expiring: $(redis-benchmark -p $port -c 50 -n 2000000 -P 16 --csv PING | tail -1)"
	redis-cli -p $port DEBUG CLOCK REAL >/dev/null
	echo "round $r, nothing expiring: $(redis-benchmark -p $port -c 50 -n 2000000 -P 16 --csv PING | tail -1)"
done

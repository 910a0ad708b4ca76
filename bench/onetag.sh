#!/usr/bin/env bash
# bench/onetag.sh — a mass expiry in one shard: DBSIZE, a request on that shard, and the sweep.
#
#   bench/onetag.sh [BIN] [PORT]
#
# Starts BIN (default: builds cmd/cellserver) with --threads 1 and DEBUG on PORT [7421] (which
# must be free), freezes its clock, fills it with redis-benchmark -c 50 -r 1000000 -n 1000000
# -P 16 CL.THROTTLE {t}user:__rand_int__ 15 30 60 (about 630k distinct keys, all of hash slot
# {t}, so all in one shard), moves the clock two hours on, then at once sends DBSIZE on one
# connection and CL.THROTTLE {t}other on another, timing both, and polls DBSIZE every 50 ms
# until only {t}other is left (at most 30 s): the time the sweep takes to reclaim the keys.
# Times are wall clock in ms, redis-cli's start included (a few ms).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-}
port=${2:-7421}
tmp=
if [[ -z $bin ]]; then
	tmp=$(mktemp -d)
	(cd "$here/.." && go build -o "$tmp/cellserver" ./cmd/cellserver)
	bin=$tmp/cellserver
fi
if redis-cli -p "$port" PING >/dev/null 2>&1; then
	echo "onetag.sh: port $port is in use" >&2
	exit 1
fi
ms() { echo $(($(date +%s%N) / 1000000)); }
"$bin" --port "$port" --threads 1 --loglevel warning --enable-debug-command yes >/dev/null 2>&1 & pid=$!
trap 'kill $pid 2>/dev/null; wait 2>/dev/null; [[ -z $tmp ]] || rm -rf "$tmp"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" DEBUG CLOCK ADVANCE 0 >/dev/null
start=$(ms)
redis-benchmark -p "$port" -c 50 -r 1000000 -n 1000000 -P 16 -q CL.THROTTLE '{t}user:__rand_int__' 15 30 60 >/dev/null
echo "keys: $(redis-cli -p "$port" DBSIZE), created in $(($(ms) - start)) ms"
redis-cli -p "$port" DEBUG CLOCK ADVANCE 7200000000000 >/dev/null
(
	s=$(ms)
	redis-cli -p "$port" CL.THROTTLE '{t}other' 15 30 60 >/dev/null
	echo "CL.THROTTLE on the shard: $(($(ms) - s)) ms"
) &
s=$(ms)
n=$(redis-cli -p "$port" DBSIZE)
echo "first DBSIZE: $n in $(($(ms) - s)) ms"
wait $!
s=$(ms)
while n=$(redis-cli -p "$port" DBSIZE); ((n > 1)); do
	(($(ms) - s > 30000)) && { echo "DBSIZE still $n after 30 s"; exit 0; }
	sleep 0.05
done
echo "DBSIZE down to $n after $(($(ms) - s)) ms"

#!/usr/bin/env bash
# bench/floodcache.sh — the client's refusal cache against one flooded key.
#
#   bench/floodcache.sh [BIN] [-- floodcache flags...]
#
# Starts BIN [a fresh build of cmd/cellserver] on a free port from 7431
# (--loglevel warning) and runs bench/floodcache: 50 goroutines call
# client.Allow on one key at full speed for 3 s, through a Client with the
# refusal cache and through one without, alternating, 2 rounds, for each of
# its limits; it prints decisions per second, allowed calls and the
# server's commands per second (INFO total_commands_processed) per run,
# then the medians and ratios. Flags after -- go to floodcache
# (-callers, -for, -rounds, -limits).
set -euo pipefail
NAME=floodcache HOST=127.0.0.1
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh

bin=
if [[ $# -gt 0 && $1 != -- ]]; then
	bin=$1
	shift
fi
[[ ${1:-} == -- ]] && shift
if [[ -z $bin ]]; then
	bin=$tmp/cellserver
	go build -o "$bin" ./cmd/cellserver
fi
go build -o "$tmp/floodcache" ./bench/floodcache
port=$(free_port 7431)
"$bin" --bind "$HOST" --port "$port" --loglevel warning >"$tmp/server.log" 2>&1 &
pids+=("$!")
for _ in $(seq 50); do (exec 3<>"/dev/tcp/$HOST/$port") 2>/dev/null && break; sleep 0.1; done
log "cellserver on $HOST:$port; floodcache $*"
"$tmp/floodcache" -addr "$HOST:$port" "$@"

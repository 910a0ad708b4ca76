#!/usr/bin/env bash
# bench/run.sh — cellserver against Redis 7, with redis-benchmark, on this machine.
#
#   bench/run.sh [all|tput|mem|go]      (default: all)
#
# Builds cellserver into a temporary directory, starts it and a redis-server
# (no persistence) on loopback ports, loads bench/gcra.lua (CL.THROTTLE's GCRA
# as a Lua script) into Redis, and runs the same redis-benchmark workloads
# (-c 50, 1M random keys) against Redis PING, Redis + Lua GCRA and the cellserver
# commands, without pipelining and with -P 16 (tput). Then it measures memory
# per live key and after expiry with bench/memprobe (mem), and runs the Go
# benchmarks (go). Each part writes its own marker block in RESULTS.md; the rest
# of the file is kept. Every process it starts is stopped on exit.
#
# Environment (defaults in brackets):
#   BENCH_QUICK=1        smoke test: tiny runs, results to bench/out/RESULTS.quick.md
#   BENCH_N              requests per non-pipelined run [400000]
#   BENCH_N_P16          requests per -P 16 run [2000000]
#   BENCH_N_LUA_P16      requests per -P 16 Redis+Lua run (it is ~10x slower) [600000]
#   BENCH_ROUNDS         rounds of the whole workload list; medians are reported [3]
#   BENCH_PIN=1          pin the servers to the last CPU and redis-benchmark to CPU 0
#                        (taskset; Go then runs with GOMAXPROCS=1) [off: as the issue
#                        measures, everything shares every core]
#   BENCH_CLIENTS        redis-benchmark -c [50]
#   BENCH_KEYSPACE       redis-benchmark -r [1000000]
#   BENCH_MEM_KEYS       keys for the memory measurement [1000000] (10000000 for 10M)
#   BENCH_GO_BENCHTIME   go test -benchtime [200000x]
#   BENCH_CS_PORT, BENCH_REDIS_PORT, BENCH_MEM_PORT   first ports tried [7301, 7302, 7303]
#   BENCH_RESULTS        the Markdown file written [bench/RESULTS.md]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
cd "$root"

what=${1:-all}
case $what in all | tput | mem | go) ;; *)
	echo "usage: bench/run.sh [all|tput|mem|go]" >&2
	exit 2
	;;
esac

quick=${BENCH_QUICK:-0}
if [[ $quick == 1 ]]; then
	N1=${BENCH_N:-20000} N16=${BENCH_N_P16:-100000} NLUA16=${BENCH_N_LUA_P16:-50000}
	ROUNDS=${BENCH_ROUNDS:-1} MEM_KEYS=${BENCH_MEM_KEYS:-50000} GO_BENCHTIME=${BENCH_GO_BENCHTIME:-2000x}
	RESULTS=${BENCH_RESULTS:-$here/out/RESULTS.quick.md}
else
	N1=${BENCH_N:-400000} N16=${BENCH_N_P16:-2000000} NLUA16=${BENCH_N_LUA_P16:-600000}
	ROUNDS=${BENCH_ROUNDS:-3} MEM_KEYS=${BENCH_MEM_KEYS:-1000000} GO_BENCHTIME=${BENCH_GO_BENCHTIME:-200000x}
	RESULTS=${BENCH_RESULTS:-$here/RESULTS.md}
fi
CLIENTS=${BENCH_CLIENTS:-50}
KEYSPACE=${BENCH_KEYSPACE:-1000000}
CS_THREADS=${BENCH_CS_THREADS:-1}
HOST=127.0.0.1
pin_server=() pin_bench=()
if [[ ${BENCH_PIN:-0} == 1 ]]; then
	pin_server=(taskset -c $(($(nproc) - 1)))
	pin_bench=(taskset -c 0)
fi

for tool in redis-server redis-benchmark redis-cli go awk; do
	command -v "$tool" >/dev/null || {
		echo "bench/run.sh: $tool is not installed (apt-get install redis-server redis-tools)" >&2
		exit 1
	}
done

NAME=bench
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

# wait_ready PORT PID NAME: until PING answers, for at most 10 s.
wait_ready() {
	for _ in $(seq 100); do
		kill -0 "$2" 2>/dev/null || { echo "bench/run.sh: $3 exited at start (see $tmp/$3.log)" >&2; cat "$tmp/$3.log" >&2; return 1; }
		[[ $(redis-cli -h "$HOST" -p "$1" PING 2>/dev/null) == PONG ]] && return 0
		sleep 0.1
	done
	echo "bench/run.sh: $3 not answering on port $1" >&2
	return 1
}

# start NAME PORT CMD...: start a server in the background and wait for it.
# Sets STARTED_PID.
start() {
	local name=$1 port=$2
	shift 2
	"${pin_server[@]+"${pin_server[@]}"}" "$@" >"$tmp/$name.log" 2>&1 &
	STARTED_PID=$!
	pids+=("$STARTED_PID")
	wait_ready "$port" "$STARTED_PID" "$name"
	log "$name on port $port (pid $STARTED_PID)"
}

# stop PID: stop a server started here, wait for it and forget it.
stop() {
	local pid=$1 keep=() p
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	for p in "${pids[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
	pids=("${keep[@]+"${keep[@]}"}")
}

# replace_block NAME FILE: put stdin between <!-- bench:NAME begin/end --> in
# RESULTS, replacing what was there, or append the block.
replace_block() {
	local name=$1 body=$tmp/block.$1 begin="<!-- bench:$1 begin -->" end="<!-- bench:$1 end -->"
	cat >"$body"
	mkdir -p "$(dirname "$RESULTS")"
	[[ -f $RESULTS ]] || printf '# cellserver benchmark results\n\nWritten by `bench/run.sh`; see bench/README.md. Text outside the marker blocks is kept.\n' >"$RESULTS"
	if grep -qF "$begin" "$RESULTS" && grep -qF "$end" "$RESULTS"; then
		awk -v b="$begin" -v e="$end" -v f="$body" '
			$0 == b { print; while ((getline l < f) > 0) print l; skip = 1; next }
			$0 == e { skip = 0 }
			!skip { print }' "$RESULTS" >"$tmp/results.new"
	else
		{ cat "$RESULTS"; printf '\n%s\n' "$begin"; cat "$body"; printf '%s\n' "$end"; } >"$tmp/results.new"
	fi
	cp "$tmp/results.new" "$RESULTS"
	log "wrote block $name in $RESULTS"
}

machine() {
	printf -- '- date: %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	printf -- '- machine: %s cores (nproc), %s, %s MiB RAM, %s\n' "$(nproc)" \
		"$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)" \
		"$(awk '/^MemTotal/ { printf "%d", $2 / 1024 }' /proc/meminfo)" "$(uname -sr)"
	printf -- '- software: %s, %s, %s\n' "$(go version | awk '{ print $3 }')" \
		"$(redis-server --version | awk '{ print "redis-server " $3 }' | sed 's/v=//')" "$(redis-benchmark --version)"
	[[ ${BENCH_PIN:-0} == 1 ]] && printf -- '- pinned: servers on CPU %s, redis-benchmark on CPU 0\n' "$(($(nproc) - 1))"
	printf -- '- git: %s\n' "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$( [[ -n $(git status --porcelain -- . ':!bench/RESULTS.md' 2>/dev/null) ]] && echo ' (with uncommitted changes)')"
}

command_line() {
	local env=""
	for v in BENCH_QUICK BENCH_PIN BENCH_CS_THREADS BENCH_N BENCH_N_P16 BENCH_N_LUA_P16 BENCH_ROUNDS BENCH_CLIENTS BENCH_KEYSPACE BENCH_MEM_KEYS BENCH_GO_BENCHTIME; do
		[[ -n ${!v:-} ]] && env+="$v=${!v} "
	done
	printf '%sbench/run.sh %s' "$env" "$what"
}

log "building cellserver"
go build -o "$tmp/cellserver" ./cmd/cellserver

# ---------------------------------------------------------------- throughput
run_tput() {
	local cs_port redis_port cs_pid redis_pid sha
	# The main cellserver runs one thread (--threads 1), as Redis runs its
	# commands on one; a second one runs the default, a thread per core, so
	# that the table shows what the setting does on this shared machine.
	cs_port=$(free_port "${BENCH_CS_PORT:-7301}")
	start cellserver "$cs_port" "$tmp/cellserver" --bind "$HOST" --port "$cs_port" --loglevel warning --threads "$CS_THREADS"
	cs_pid=$STARTED_PID
	local csd_port
	csd_port=$(free_port $((cs_port + 2)))
	start cellserver-default "$csd_port" "$tmp/cellserver" --bind "$HOST" --port "$csd_port" --loglevel warning
	redis_port=$(free_port "${BENCH_REDIS_PORT:-7302}")
	[[ $redis_port != "$cs_port" ]] || redis_port=$(free_port $((cs_port + 1)))
	start redis "$redis_port" redis-server --bind "$HOST" --port "$redis_port" --save '' --appendonly no --daemonize no
	redis_pid=$STARTED_PID
	sha=$(redis-cli -h "$HOST" -p "$redis_port" SCRIPT LOAD "$(cat "$here/gcra.lua")")
	[[ $sha =~ ^[0-9a-f]{40}$ ]] || { echo "bench/run.sh: SCRIPT LOAD failed: $sha" >&2; return 1; }

	# Sanity: both GCRAs give the same first reply.
	local a b
	a=$(redis-cli -h "$HOST" -p "$redis_port" EVALSHA "$sha" 1 bench:check 15 30 60 | tr '\n' ' ')
	b=$(redis-cli -h "$HOST" -p "$cs_port" CL.THROTTLE bench:check 15 30 60 | tr '\n' ' ')
	[[ $a == "$b" ]] || { echo "bench/run.sh: Lua GCRA replied '$a', cellserver '$b'" >&2; return 1; }

	# workload | target | port | command. Keys: 1M random, a prefix per
	# workload so that no key changes kind. Arguments comparable to
	# CL.THROTTLE 15 30 60 (a burst of 16, 30 per minute); EXACT at limit 100
	# as the issue states its target.
	local R=$redis_port C=$cs_port D=$csd_port
	local workloads=(
		"PING|Redis|$R|PING"
		"GCRA (Lua EVALSHA)|Redis+Lua|$R|EVALSHA $sha 1 key:__rand_int__ 15 30 60"
		"CL.THROTTLE|cellserver|$C|CL.THROTTLE key:__rand_int__ 15 30 60"
		"TB.TAKE|cellserver|$C|TB.TAKE tbk:__rand_int__ 16 30 60"
		"SW.HIT|cellserver|$C|SW.HIT swk:__rand_int__ 30 60"
		"SW.HIT EXACT|cellserver|$C|SW.HIT sxk:__rand_int__ 100 60 EXACT"
		"FW.INCR|cellserver|$C|FW.INCR fwk:__rand_int__ 30 60"
		"PING|cellserver|$C|PING"
		"CL.THROTTLE hot key|cellserver|$C|CL.THROTTLE hotkey 15 30 60"
		"GCRA hot key (Lua)|Redis+Lua|$R|EVALSHA $sha 1 hotkey 15 30 60"
		"CL.THROTTLE|cellserver, default threads|$D|CL.THROTTLE key:__rand_int__ 15 30 60"
		"PING|cellserver, default threads|$D|PING"
	)
	local raw=$tmp/raw.txt
	: >"$raw"
	local round p w name target port cmd n out line flush_port
	for round in $(seq "$ROUNDS"); do
		for p in 1 16; do
			for w in "${workloads[@]}"; do
				IFS='|' read -r name target port cmd <<<"$w"
				n=$N1
				if [[ $p == 16 ]]; then
					n=$N16
					[[ $target == Redis+Lua ]] && n=$NLUA16
				fi
				# Every server starts each run empty, not only the one under test:
				# the keys a run leaves behind expire during the next one, and a
				# server expiring them (Redis's active expiry, cellserver's sweep)
				# takes CPU from the run on this small machine.
				for flush_port in "$R" "$C" "$D"; do
					redis-cli -h "$HOST" -p "$flush_port" FLUSHALL >/dev/null
				done
				log "round $round -P $p: $name on $target, -n $n"
				# shellcheck disable=SC2086 # cmd is the words of the command
				out=$("${pin_bench[@]+"${pin_bench[@]}"}" redis-benchmark -h "$HOST" -p "$port" -c "$CLIENTS" -n "$n" -r "$KEYSPACE" -P "$p" --csv $cmd)
				# The header names the columns; take rps, p50 and p99 by name.
				line=$(awk -F, '
					{ gsub(/"/, "") }
					NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
					NF > 1 { r = $(col["rps"]) "|" $(col["p50_latency_ms"]) "|" $(col["p99_latency_ms"]) }
					END { print r }' <<<"$out")
				[[ $line =~ ^[0-9.]+\|[0-9.]+\|[0-9.]+$ ]] || { echo "bench/run.sh: cannot parse redis-benchmark output: $out" >&2; return 1; }
				echo "$round|$p|$name|$target|$line" >>"$raw"
				log "  $line (ops/s|p50|p99)"
			done
		done
	done
	mkdir -p "$here/out"
	cp "$raw" "$here/out/tput-raw.txt"

	{
		echo "## Throughput and latency (redis-benchmark)"
		echo
		machine
		printf -- '- command: `%s`\n' "$(command_line)"
		printf -- '- each run: `redis-benchmark -c %s -r %s -n N [-P 16] --csv <command>`, N = %s non-pipelined, %s with -P 16 (%s for Redis+Lua with -P 16); FLUSHALL of every server before each run (so that no server expires the keys of one run during the next); %s round(s) of the whole list, run one after the other.\n' \
			"$CLIENTS" "$KEYSPACE" "$N1" "$N16" "$NLUA16" "$ROUNDS"
		echo '- ops/s, p50 and p99 are the median over rounds; the ratios are computed within each round (against that round'"'"'s Redis PING, Redis+Lua GCRA and cellserver CL.THROTTLE runs) and their median is shown, with the range over rounds in brackets.'
		printf -- '- cellserver runs with `--threads %s` (one thread runs commands, as in Redis); the rows marked "default threads" come from a second cellserver with the default, one thread per core (%s here).\n' "$CS_THREADS" "$(nproc)"
		echo '- Redis+Lua GCRA is bench/gcra.lua (TIME, GET, the GCRA arithmetic in µs, SET PX when allowed, five integers). Key names are `<prefix>:` + 12 digits; the hot-key rows send every request to one key (almost all limited).'
		echo
		awk -F'|' '
			function median(list,   a, n, i, j, t) {
				n = split(list, a, " ")
				for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
				return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			}
			function range(list,   a, n, i, lo, hi) {
				n = split(list, a, " "); lo = hi = a[1]
				for (i = 2; i <= n; i++) { if (a[i] + 0 < lo + 0) lo = a[i]; if (a[i] + 0 > hi + 0) hi = a[i] }
				return n > 1 ? sprintf(" [%.2f–%.2f]", lo, hi) : ""
			}
			{
				round = $1; p = $2; id = $3 "|" $4
				if (!((p, id) in seen)) { seen[p, id] = 1; order[p, ++cnt[p]] = id }
				rps[p, id, round] = $5; rounds[round] = 1
				ops[p, id] = ops[p, id] " " $5; p50[p, id] = p50[p, id] " " $6; p99[p, id] = p99[p, id] " " $7
			}
			END {
				for (pi = 1; pi <= 2; pi++) {
					p = pi == 1 ? 1 : 16
					printf "### %s\n\n", p == 1 ? "Not pipelined (-P 1)" : "Pipelined (-P 16)"
					print "| workload | target | ops/s | p50 ms | p99 ms | ratio vs Redis PING | ratio vs Redis+Lua GCRA | ratio vs CL.THROTTLE |"
					print "|---|---|---:|---:|---:|---:|---:|---:|"
					for (i = 1; i <= cnt[p]; i++) {
						id = order[p, i]; split(id, f, "|")
						rp = ""; rl = ""; rc = ""
						for (r in rounds) {
							if ((p, "PING|Redis", r) in rps) rp = rp " " rps[p, id, r] / rps[p, "PING|Redis", r]
							if ((p, "GCRA (Lua EVALSHA)|Redis+Lua", r) in rps) rl = rl " " rps[p, id, r] / rps[p, "GCRA (Lua EVALSHA)|Redis+Lua", r]
							if ((p, "CL.THROTTLE|cellserver", r) in rps) rc = rc " " rps[p, id, r] / rps[p, "CL.THROTTLE|cellserver", r]
						}
						printf "| %s | %s | %.0f | %.3f | %.3f | %.2f%s | %.2f%s | %.2f%s |\n", f[1], f[2],
							median(ops[p, id]), median(p50[p, id]), median(p99[p, id]),
							median(rp), range(rp), median(rl), range(rl), median(rc), range(rc)
					}
					print ""
				}
			}' "$raw"
	} | replace_block run.sh

	stop "$cs_pid"
	stop "$redis_pid"
}

# -------------------------------------------------------------------- memory
run_mem() {
	local mem_port redis_port cs_pid redis_pid
	mem_port=$(free_port "${BENCH_MEM_PORT:-7303}")
	start cellserver-mem "$mem_port" "$tmp/cellserver" --bind "$HOST" --port "$mem_port" --loglevel warning --enable-debug-command yes
	cs_pid=$STARTED_PID
	redis_port=$(free_port $((mem_port + 1)))
	start redis-mem "$redis_port" redis-server --bind "$HOST" --port "$redis_port" --save '' --appendonly no --daemonize no
	redis_pid=$STARTED_PID
	go build -o "$tmp/memprobe" ./bench/memprobe
	log "memory: $MEM_KEYS keys"
	"$tmp/memprobe" -cellserver "$HOST:$mem_port" -cellserver-pid "$cs_pid" \
		-redis "$HOST:$redis_port" -redis-pid "$redis_pid" -script "$here/gcra.lua" \
		-keys "$MEM_KEYS" >"$tmp/mem.md"
	{
		echo "## Memory per live CL.THROTTLE key, $MEM_KEYS keys (bench/memprobe)"
		echo
		machine
		printf -- '- command: `%s`\n\n' "$(command_line)"
		cat "$tmp/mem.md"
		echo
	} | replace_block "mem-$MEM_KEYS"
	stop "$cs_pid"
	stop "$redis_pid"
}

# ------------------------------------------------------------- Go benchmarks
run_go() {
	local cmd="go test -run xxx -bench . -benchtime $GO_BENCHTIME ./bench/"
	log "$cmd"
	$cmd >"$tmp/go.txt" 2>&1 || { cat "$tmp/go.txt" >&2; return 1; }
	{
		echo "## Go benchmarks (commands_bench_test.go)"
		echo
		machine
		printf -- '- command: `%s`\n\n' "$cmd"
		echo '```'
		grep -E '^(goos|goarch|pkg|cpu|Benchmark|PASS|ok)' "$tmp/go.txt"
		echo '```'
	} | replace_block go
}

# One call per line: set -e does not apply inside a function called from
# an && list.
case $what in
all)
	run_tput
	run_mem
	run_go
	;;
tput) run_tput ;;
mem) run_mem ;;
go) run_go ;;
esac
log "done: $RESULTS"

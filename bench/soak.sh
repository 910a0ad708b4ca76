#!/usr/bin/env bash
# bench/soak.sh — cellserver under full redis-benchmark load with key churn.
#
#   bench/soak.sh [SECONDS]      (default 600)
#
# Builds cmd/cellserver into a temporary directory and starts it on a loopback
# port. For SECONDS it runs five redis-benchmark processes at once, each in a
# loop of short runs, one per workload: CL.THROTTLE, TB.TAKE, SW.HIT, SW.HIT
# EXACT and FW.INCR, each on its own key prefix with __rand_int__ keys drawn
# from 10M (-r), so nearly every request makes a new key and keys expire
# within about 2 s: the keyspace churns at the full request rate. Every few
# seconds it samples the server's RSS (/proc/PID/status VmRSS) and key count
# (INFO keyspace), into bench/out/soak-SECONDSs.samples.
#
# It fails (exit 1) when
#   - any reply is an error: redis-benchmark prints "Error from server" and
#     exits non-zero on the first one (a hung run is killed and counts too);
#   - the server exits;
#   - RSS once warm grows more than SOAK_RSS_TOLERANCE percent: the median
#     sample of the run's last 40% may exceed the median between 20% and 60%
#     of it (the warm level) by at most the tolerance.
# It prints a summary table (Markdown) either way. Every process it starts is
# stopped when it exits, also on failure or Ctrl-C.
#
# Environment (defaults in brackets):
#   SOAK_RSS_TOLERANCE   percent RSS may grow once warm [10]
#   SOAK_SAMPLE          seconds between samples [2]
#   SOAK_CLIENTS         redis-benchmark -c, per workload [20]
#   SOAK_PIPELINE        redis-benchmark -P [4]
#   SOAK_RUN_N           requests per redis-benchmark run [20000]
#   SOAK_KEYSPACE        redis-benchmark -r [10000000]
#   SOAK_PORT            first port tried [7321]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
cd "$root"

duration=${1:-600}
if ! [[ $duration =~ ^[0-9]+$ ]] || ((duration < 10)); then
	echo "usage: bench/soak.sh [SECONDS] (at least 10; default 600)" >&2
	exit 2
fi
TOL=${SOAK_RSS_TOLERANCE:-10}
INTERVAL=${SOAK_SAMPLE:-2}
CLIENTS=${SOAK_CLIENTS:-20}
PIPELINE=${SOAK_PIPELINE:-4}
RUN_N=${SOAK_RUN_N:-20000}
KEYSPACE=${SOAK_KEYSPACE:-10000000}
HOST=127.0.0.1

for tool in redis-benchmark redis-cli go awk timeout; do
	command -v "$tool" >/dev/null || {
		echo "bench/soak.sh: $tool is not installed (apt-get install redis-tools)" >&2
		exit 1
	}
done

# The workloads: a name and the command redis-benchmark sends.
names=(CL.THROTTLE TB.TAKE SW.HIT "SW.HIT EXACT" FW.INCR)
cmds=(
	"CL.THROTTLE soak:cl:__rand_int__ 15 30 60"
	"TB.TAKE soak:tb:__rand_int__ 16 30 60"
	"SW.HIT soak:sw:__rand_int__ 30 1"
	"SW.HIT soak:sx:__rand_int__ 30 1 EXACT"
	"FW.INCR soak:fw:__rand_int__ 30 1"
)

NAME=soak
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

log "building cellserver"
go build -o "$tmp/cellserver" ./cmd/cellserver
port=$(free_port "${SOAK_PORT:-7321}")
"$tmp/cellserver" --bind "$HOST" --port "$port" --loglevel warning >"$tmp/server.log" 2>&1 &
server=$!
pids+=("$server")
for _ in $(seq 100); do
	[[ $(redis-cli -h "$HOST" -p "$port" PING 2>/dev/null) == PONG ]] && break
	kill -0 "$server" 2>/dev/null || { cat "$tmp/server.log" >&2; exit 1; }
	sleep 0.1
done
log "cellserver on port $port (pid $server); load for ${duration}s"

start=$(date +%s)
deadline=$((start + duration))

# workload I: redis-benchmark runs of RUN_N requests until the deadline.
# Each run's exit status and output are kept; the loop stops at the first
# failure and leaves a file "fail" with the reason.
workload() {
	local i=$1 dir=$tmp/w$1 runs=0 rc
	mkdir -p "$dir"
	# shellcheck disable=SC2206 # the command is split into words on purpose
	local cmd=(${cmds[$i]})
	while (($(date +%s) < deadline)); do
		rc=0
		timeout 60 redis-benchmark -h "$HOST" -p "$port" -c "$CLIENTS" -P "$PIPELINE" -n "$RUN_N" \
			-r "$KEYSPACE" -q "${cmd[@]}" >"$dir/out" 2>&1 || rc=$?
		if ((rc != 0)) || grep -q 'Error' "$dir/out"; then
			{
				if ((rc == 124)); then echo "redis-benchmark hung: killed after 60 s"; else echo "redis-benchmark exited $rc"; fi
				tr '\r' '\n' <"$dir/out" | grep -v '^ *$' | tail -5
			} >"$dir/fail"
			return
		fi
		runs=$((runs + 1))
		echo "$runs" >"$dir/runs"
		# The last figure of -q output: "...: 51234.56 requests per second, p50=0.1 msec".
		tr '\r' '\n' <"$dir/out" | awk '/requests per second/ { r = $(NF - 5); p = $(NF - 1) } END { print r, p }' |
			sed 's/p50=//' >>"$dir/rates"
	done
}

for i in "${!cmds[@]}"; do
	workload "$i" &
	pids+=("$!")
done

# Sample until the deadline (and stop early if the server goes).
mkdir -p "$here/out"
samples=$here/out/soak-${duration}s.samples # kept: seconds, RSS KiB, live keys
: >"$samples"
while (($(date +%s) < deadline)); do
	sleep "$INTERVAL"
	now=$(($(date +%s) - start))
	if ! kill -0 "$server" 2>/dev/null; then
		echo "server exited" >"$tmp/server-died"
		break
	fi
	keys=$(redis-cli -h "$HOST" -p "$port" INFO keyspace 2>/dev/null | tr -d '\r' | sed -n 's/^db0:keys=\([0-9]*\).*/\1/p')
	echo "$now $(rss_kib "$server") ${keys:-0}" >>"$samples"
done
for pid in "${pids[@]:1}"; do wait "$pid" 2>/dev/null || true; done
elapsed=$(($(date +%s) - start))

# Idle after the load: once the keys have expired (within about 2 s; at most
# 20 s are waited), the memory they held should be given back.
idle_keys=-1
for _ in $(seq 40); do
	kill -0 "$server" 2>/dev/null || break
	idle_keys=$(redis-cli -h "$HOST" -p "$port" DBSIZE 2>/dev/null || echo -1)
	[[ $idle_keys == 0 ]] && break
	sleep 0.5
done
idle_rss=$(rss_kib "$server")

# ---------------------------------------------------------------- summary
failed=0
printf '\n### Soak: `bench/soak.sh %s`\n\n' "$duration"
printf -- '- date: %s; git %s; %s cores; load %s s (requested %s s)\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" \
	"$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$(nproc)" "$elapsed" "$duration"
printf -- '- five redis-benchmark processes at once, each `-c %s -P %s -r %s`, runs of %s requests\n\n' \
	"$CLIENTS" "$PIPELINE" "$KEYSPACE" "$RUN_N"
printf '| workload | command | runs | requests | ops/s | median p50 ms | errors |\n|---|---|---|---|---|---|---|\n'
total=0
for i in "${!cmds[@]}"; do
	dir=$tmp/w$i
	runs=$(cat "$dir/runs" 2>/dev/null || echo 0)
	reqs=$((runs * RUN_N))
	total=$((total + reqs))
	p50=$(awk '{ print $2 }' "$dir/rates" 2>/dev/null | sort -n | awk '{ a[NR] = $1 } END { print (NR ? a[int((NR + 1) / 2)] : "-") }')
	err=none
	if [[ -f $dir/fail ]]; then
		err=$(head -c 300 "$dir/fail" | tr '\n' ' ')
		failed=1
	fi
	printf '| %s | `%s` | %s | %s | %s | %s | %s |\n' "${names[$i]}" "${cmds[$i]}" "$runs" "$reqs" \
		"$((reqs / (elapsed > 0 ? elapsed : 1)))" "$p50" "$err"
done
printf '| all | | | %s | %s | | |\n\n' "$total" "$((total / (elapsed > 0 ? elapsed : 1)))"

if [[ -f $tmp/server-died ]]; then
	echo "**The server exited during the run.**"
	tail -20 "$tmp/server.log"
	failed=1
fi

# RSS: the warm level is the median RSS sample in [20%, 60%) of the run,
# the end level the median in [60%, 100%]; the end level may exceed the warm
# level by at most the tolerance. RSS follows the number of live keys, which
# follows the request rate on a shared machine, and the collector's
# sawtooth: medians of two long windows show a trend, single peaks do not.
awk -v d="$duration" -v tol="$TOL" '
	function median(v, n,    i, j, x) {
		for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
		return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
	}
	{ t[NR] = $1; r[NR] = $2; k[NR] = $3 }
	END {
		if (NR == 0) { print "no samples"; exit 1 }
		nw = 0; ne = 0; peak = 0; peakt = 0
		for (i = 1; i <= NR; i++) {
			if (t[i] >= 0.2 * d && t[i] < 0.6 * d) { nw++; wr[nw] = r[i]; wk[nw] = k[i] }
			if (t[i] >= 0.6 * d) { ne++; er[ne] = r[i]; ek[ne] = k[i] }
			if (t[i] >= 0.2 * d && r[i] > peak) { peak = r[i]; peakt = t[i] }
		}
		if (nw < 3 || ne < 3) { print "too few samples to compare RSS"; exit 1 }
		warm = median(wr, nw); end = median(er, ne)
		growth = (end - warm) * 100 / warm
		printf "| RSS (VmRSS, sampled every %s s) | MiB | live keys (INFO keyspace) |\n|---|---|---|\n", '"$INTERVAL"'
		printf "| first sample, at %d s | %.1f | %d |\n", t[1], r[1] / 1024, k[1]
		printf "| warm level: median of %d samples in %d-%d s | %.1f | %d |\n", nw, 0.2 * d, 0.6 * d, warm / 1024, median(wk, nw)
		printf "| end level: median of %d samples in %d-%d s | %.1f | %d |\n", ne, 0.6 * d, d, end / 1024, median(ek, ne)
		printf "| highest once warm, at %d s | %.1f | |\n", peakt, peak / 1024
		printf "| last sample, at %d s | %.1f | %d |\n", t[NR], r[NR] / 1024, k[NR]
		printf "| **growth once warm** (end / warm level) | **%+.1f%%** (tolerance %d%%) | |\n", growth, tol
		printf "| idle after the load, %d keys left | %.1f | |\n", '"$idle_keys"', '"$idle_rss"' / 1024
		printf "\nRSS over time (MiB, about every 10%% of the run):"
		step = NR / 10; if (step < 1) step = 1
		for (x = 1; x <= NR; x += step) printf " %d s: %.0f;", t[int(x)], r[int(x)] / 1024
		printf "\n"
		exit growth > tol ? 1 : 0
	}' "$samples" || failed=1

if ((failed)); then
	echo
	echo "bench/soak.sh: FAILED" >&2
	exit 1
fi
echo
echo "bench/soak.sh: passed" >&2

# bench/lib.sh — what the scripts of bench/ share, sourced after they set
# NAME (their name in log lines and messages) and HOST (loopback).
#
# It makes a scratch directory, $tmp, and a list of the processes the
# script starts, $pids; on exit, however the script ends, it stops them
# (SIGKILL after 5 s) and removes $tmp. log writes a timestamped line to
# standard error; free_port finds a port nothing listens on; rps reads a
# redis-benchmark -q run's requests per second from its output; median
# prints the median of the numbers on its input.

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cell$NAME.XXXXXX")
pids=()
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	for pid in "${pids[@]+"${pids[@]}"}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]+"${pids[@]}"}"; do
		# Bounded: SIGKILL whatever has not gone after 5 s.
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log() { printf '%s %s: %s\n' "$(date +%T)" "$NAME" "$*" >&2; }

# free_port P: the first port from P on that nothing listens on.
free_port() {
	local p=$1
	for _ in $(seq 100); do
		if ! (exec 3<>"/dev/tcp/$HOST/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
		p=$((p + 1))
	done
	echo "bench/$NAME: no free port from $1" >&2
	return 1
}

# rps: the requests per second of the redis-benchmark -q output on stdin.
rps() { grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1; }

# median: the median of the space- or line-separated numbers on stdin.
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

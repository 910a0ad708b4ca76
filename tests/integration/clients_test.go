package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
)

// clientsDir holds the non-Go client tests (tests/clients): Node.js
// scripts with the npm packages .ci/run installs (npm ci), and a Python
// script for Debian's python3-redis.
var clientsDir = filepath.Join("..", "clients")

// needClient skips a test whose client is missing, except on CI (which
// installs them all), where it fails.
func needClient(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is missing on CI", what)
	}
	t.Skipf("%s is not installed (.ci/run installs it)", what)
}

// runClient runs one client script against a fresh server and checks it
// reports success: the scripts assert every reply themselves.
func runClient(t *testing.T, want string, name string, args ...string) {
	t.Helper()
	runClientEnv(t, nil, want, name, args...)
}

// runClientEnv is runClient with env added to the script's environment.
func runClientEnv(t *testing.T, env []string, want string, name string, args ...string) {
	t.Helper()
	ts := startServer(t)
	env = append([]string{"CELLSERVER_PORT=" + strconv.Itoa(ts.Port)}, env...)
	out, errOut, err := runToolEnv(t, env, name, args...)
	if err != nil || !strings.HasPrefix(out, want) {
		t.Fatalf("%s %q: %v\nstdout: %s\nstderr: %s", name, args, err, out, errOut)
	}
}

// runNodeClient runs a script of tests/clients/node with node, skipping
// (failing, on CI) where node or the npm package module is missing.
func runNodeClient(t *testing.T, module string, env []string, want, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(clientsDir, "node", "node_modules", module))
	needClient(t, "node with the npm package "+module+" (npm ci in tests/clients/node)", err == nil && modErr == nil)
	runClientEnv(t, env, want, node, filepath.Join(clientsDir, "node", script))
}

// TestIoredis: ioredis with its defaults (RESP2): the four limiter
// commands, a pipeline and a MULTI, exact replies.
func TestIoredis(t *testing.T) {
	t.Parallel()
	runNodeClient(t, "ioredis", nil, "ioredis ok", "ioredis_test.js")
}

// TestNodeRedis: node-redis with its defaults, the same scenario.
func TestNodeRedis(t *testing.T) {
	t.Parallel()
	runNodeClient(t, "redis", nil, "node-redis ok", "node_redis_test.js")
}

// TestNodeRedisResp3: node-redis 5 asked for RESP3 (HELLO 3), the same
// scenario; it checks that CLIENT INFO shows resp=3.
func TestNodeRedisResp3(t *testing.T) {
	t.Parallel()
	runNodeClient(t, "redis5", []string{"NODE_REDIS=redis5"}, "node-redis resp3 ok", "node_redis_test.js")
}

// TestRedisPy: redis-py, Debian's python3-redis for the system python3,
// the same scenario.
func TestRedisPy(t *testing.T) {
	t.Parallel()
	const python = "/usr/bin/python3"
	ok := exec.Command(python, "-c", "import redis").Run() == nil
	needClient(t, "python3-redis for /usr/bin/python3", ok)
	runClient(t, "redis-py ok", python, filepath.Join(clientsDir, "python", "redis_py_test.py"))
}

// TestJedisWire: what Jedis 5 sends with its defaults, byte for byte, and
// the replies it parses. No Java runtime is available to the tests, so
// this replays its wire traffic: on connect, RESP2 (no HELLO) and two
// CLIENT SETINFO calls whose errors it ignores; then each command as a
// multibulk of bulk strings, the name as given to sendCommand and integer
// arguments in decimal.
func TestJedisWire(t *testing.T) {
	t.Parallel()
	rc := rawClient(t)
	rc.Send("*4\r\n$6\r\nCLIENT\r\n$7\r\nSETINFO\r\n$8\r\nLIB-NAME\r\n$5\r\njedis\r\n" +
		"*4\r\n$6\r\nCLIENT\r\n$7\r\nSETINFO\r\n$7\r\nLIB-VER\r\n$5\r\n5.1.0\r\n")
	if got := rc.Reply() + rc.Reply(); got != "+OK\r\n+OK\r\n" {
		t.Fatalf("CLIENT SETINFO: %q", got)
	}
	rc.WantDo("+OK\r\n", "DEBUG", "CLOCK", "SET", strconv.FormatInt(t0, 10))
	// jedis.sendCommand(() -> SafeEncoder.encode("CL.THROTTLE"), "user:42", "15", "30", "60")
	rc.Send("*5\r\n$11\r\nCL.THROTTLE\r\n$7\r\nuser:42\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n")
	if got := rc.Reply(); got != "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n" {
		t.Fatalf("CL.THROTTLE: %q", got)
	}
	// A Jedis Pipeline writes its commands at once and reads the replies
	// in order; a Transaction wraps them in MULTI/EXEC.
	rc.Send(testkit.Encode("TB.TAKE", "tb", "10", "1", "1") + testkit.Encode("FW.INCR", "fw", "10", "60"))
	if got := rc.Reply() + rc.Reply(); got != testkit.Ints(0, 10, 9, -1, 1)+testkit.Ints(0, 10, 9, -1, 60) {
		t.Fatalf("pipeline: %q", got)
	}
	rc.Send(testkit.Encode("MULTI") + testkit.Encode("SW.HIT", "sw", "10", "60") + testkit.Encode("EXEC"))
	if got := rc.Reply() + rc.Reply() + rc.Reply(); got != "+OK\r\n+QUEUED\r\n*1\r\n"+testkit.Ints(0, 10, 9, -1, 120) {
		t.Fatalf("transaction: %q", got)
	}
	info := rc.Do("CLIENT", "INFO")
	if !strings.Contains(info, " lib-name=jedis lib-ver=5.1.0") || !strings.Contains(info, " resp=2") {
		t.Fatalf("CLIENT INFO: %q", info)
	}
}

// Package integration tests cellserver over real TCP with real clients:
// go-redis v9 (RESP2 and RESP3), raw RESP written by hand, and redis-cli
// and redis-benchmark where they are installed. Every test starts its own
// in-process server on 127.0.0.1:0 with DEBUG CLOCK enabled, freezes the
// server's clock over the wire when it needs time, and asserts exact
// replies (docs/commands.md is the contract).
package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/internal/testkit/inproc"
	"github.com/cellserver/cellserver/server"
	"github.com/redis/go-redis/v9"
)

// t0 is the instant most tests freeze the clock at: a whole second that is
// also a multiple of 60 s since the Unix epoch, so that fixed and sliding
// windows of 1, 10, 20, 30 and 60 s all start exactly there.
const t0 = int64(1_700_000_040_000_000_000)

const (
	sec = int64(1_000_000_000)
	ms  = int64(1_000_000)
)

// testServer is one in-process cellserver (testkit/inproc) and the
// go-redis clients the tests make for it.
type testServer struct{ *inproc.Server }

// startServer starts a server with DEBUG enabled and the configuration
// changes of opts, and shuts it down when the test ends.
func startServer(t testing.TB, opts ...func(*server.Config)) *testServer {
	t.Helper()
	return &testServer{inproc.Start(t, opts...)}
}

// frozenClient starts a server and returns a go-redis client for it with
// the server's clock frozen at t0.
func frozenClient(t testing.TB) *redis.Client {
	t.Helper()
	rdb := startServer(t).client(t)
	setClock(t, rdb, t0)
	return rdb
}

// rawClient starts a server and returns a raw connection to it.
func rawClient(t testing.TB) *testkit.Conn {
	t.Helper()
	return startServer(t).Dial(t)
}

// withDebug returns an option that turns DEBUG on or off.
func withDebug(on bool) func(*server.Config) {
	return func(c *server.Config) { c.EnableDebugCommand = on }
}

// eachProtocol runs fn once per protocol (go-redis's RESP3 default and
// RESP2), as parallel subtests, each on a fresh server whose clock is
// frozen at t0.
func eachProtocol(t *testing.T, fn func(t *testing.T, ts *testServer, rdb *redis.Client)) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			ts := startServer(t)
			rdb := ts.client(t, p.opt)
			setClock(t, rdb, t0)
			fn(t, ts, rdb)
		})
	}
}

// bothProtocols runs fn once per protocol, as subtests, each with a client
// of its own for ts.
func bothProtocols(t *testing.T, ts *testServer, fn func(t *testing.T, rdb *redis.Client)) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) { fn(t, ts.client(t, p.opt)) })
	}
}

// client returns a go-redis client for ts, closed when the test ends.
// opts may change the default options (RESP3, three retries).
func (ts *testServer) client(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: ts.Addr, ReadTimeout: testkit.IOTimeout, WriteTimeout: testkit.IOTimeout}
	for _, f := range opts {
		f(o)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// resp2 makes a go-redis client speak RESP2.
func resp2(o *redis.Options) { o.Protocol = 2 }

// noRetry makes a go-redis client send every command once only.
func noRetry(o *redis.Options) { o.MaxRetries = -1 }

var ctx = context.Background()

// doer is what the assertions need of a go-redis client or connection.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// --- go-redis assertions -------------------------------------------------

// do runs a command and fails the test on an error reply.
func do(t testing.TB, rdb doer, args ...any) any {
	t.Helper()
	v, err := rdb.Do(ctx, args...).Result()
	if err != nil {
		t.Fatalf("%v: unexpected error %v", args, err)
	}
	return v
}

// wantOK asserts that a command replies +OK.
func wantOK(t testing.TB, rdb doer, args ...any) {
	t.Helper()
	wantVal(t, rdb, "OK", args...)
}

// wantVal asserts a command's decoded reply (go-redis types: string,
// int64, []any, map[any]any, nil).
func wantVal(t testing.TB, rdb doer, want any, args ...any) {
	t.Helper()
	got, err := rdb.Do(ctx, args...).Result()
	if errors.Is(err, redis.Nil) {
		err, got = nil, nil
	}
	if err != nil {
		t.Fatalf("%v: unexpected error %q, want %#v", args, err, want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%v: got %#v, want %#v", args, got, want)
	}
}

// wantInts asserts a limiter reply (or any array of integers).
func wantInts(t testing.TB, rdb doer, want []int64, args ...any) {
	t.Helper()
	got, err := rdb.Do(ctx, args...).Int64Slice()
	if err != nil {
		t.Fatalf("%v: unexpected error %q, want %v", args, err, want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%v: got %v, want %v", args, got, want)
	}
}

// wantErr asserts that a command replies exactly the error text want
// (without the leading '-').
func wantErr(t testing.TB, rdb doer, want string, args ...any) {
	t.Helper()
	v, err := rdb.Do(ctx, args...).Result()
	if err == nil {
		t.Fatalf("%v: got %#v, want error %q", args, v, want)
	}
	if err.Error() != want {
		t.Fatalf("%v:\n got error %q\nwant error %q", args, err.Error(), want)
	}
}

// ints is shorthand for a limiter reply.
func ints(v ...int64) []int64 { return v }

// setClock freezes the server's clock at ns.
func setClock(t testing.TB, rdb doer, ns int64) {
	t.Helper()
	wantOK(t, rdb, "DEBUG", "CLOCK", "SET", ns)
}

// advance moves the server's frozen clock forward by d ns.
func advance(t testing.TB, rdb doer, d int64) {
	t.Helper()
	wantOK(t, rdb, "DEBUG", "CLOCK", "ADVANCE", d)
}

// containsLine reports whether the CRLF-separated text (INFO's layout)
// has the line.
func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\r\n") {
		if l == line {
			return true
		}
	}
	return false
}

// netnsIP is the non-loopback address a test gets in the network
// namespace inOwnNetns makes for it: a TEST-NET-1 address (RFC 5737) on
// that namespace's own loopback interface, reachable from nowhere else.
const netnsIP = "192.0.2.1"

// inOwnNetns runs the calling test again, alone, in a network namespace
// of its own (unshare --net, as root), whose loopback interface also
// carries netnsIP, so that a client connecting to netnsIP is a remote
// client by its address while every packet stays inside the namespace.
// Called from the test itself: in the child it returns netnsIP and true,
// and the test goes on; in the parent it runs the child, fails the test if
// the child failed, and returns false: the test returns. It skips the test
// where namespaces cannot be made (no unshare or ip, not root).
func inOwnNetns(t *testing.T) (string, bool) {
	t.Helper()
	if os.Getenv("CELLSERVER_TEST_NETNS") == t.Name() {
		return netnsIP, true
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s to make a network namespace with", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace takes root")
	}
	script := `ip link set lo up && ip addr add ` + netnsIP + `/32 dev lo && exec "$0" -test.run "^$1\$" -test.count 1`
	cmd := exec.Command("unshare", "--net", "--", "sh", "-c", script, os.Args[0], t.Name())
	cmd.Env = append(os.Environ(), "CELLSERVER_TEST_NETNS="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "Operation not permitted") {
			t.Skipf("no network namespace here: %s", out)
		}
		t.Fatalf("in its own network namespace: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "PASS") {
		t.Fatalf("in its own network namespace, the test did not pass:\n%s", out)
	}
	return "", false
}

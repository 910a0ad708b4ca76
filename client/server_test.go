package client_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(waitWorkerEnv); spec != "" { // a worker of TestWaitPaces
		if err := waitWorker(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if _, err := testkit.BuildErr(testkit.Cellserver); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testkit.RemoveBuilds()
	os.Exit(code)
}

// t0 is the instant the tests freeze the server's clock at (and set the
// clients' clocks to): a multiple of 86400 s, so that fixed windows of a
// second, a minute and a day all start there.
var t0 = time.Unix(1_700_006_400, 0)

// realServer is one cellserver process on 127.0.0.1: the tests run the
// real server as a separate process, which they can stop and start again
// on the same port.
type realServer struct {
	*testkit.Process
}

// startReal starts cellserver on a free port, with DEBUG enabled and its
// clock frozen at t0, and stops it when the test ends.
func startReal(t testing.TB) *realServer {
	t.Helper()
	s := &realServer{testkit.StartProcess(t, testkit.Build(t, testkit.Cellserver), 0,
		"--bind", "127.0.0.1", "--enable-debug-command", "yes", "--loglevel", "notice")}
	s.freeze(t)
	return s
}

// Start runs the stopped server again on its port, and freezes its clock
// at t0.
func (s *realServer) Start(t testing.TB) {
	t.Helper()
	s.Restart()
	s.freeze(t)
}

func (s *realServer) freeze(t testing.TB) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	if err := rdb.Do(context.Background(), "DEBUG", "CLOCK", "SET", t0.UnixNano()).Err(); err != nil {
		t.Fatal(err)
	}
}

// fakeClock is the clients' clock: it moves only when a test says so.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newRedis returns a go-redis client for s that sends each command once.
func newRedis(t testing.TB, s *realServer) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

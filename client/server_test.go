package client_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverBin is the cellserver binary TestMain builds: the tests run the
// real server as a separate process, which they can stop and start again
// on the same port.
var serverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cellserver-client-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serverBin = filepath.Join(dir, "cellserver")
	out, err := exec.Command("go", "build", "-o", serverBin, "github.com/cellserver/cellserver/cmd/cellserver").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building cellserver: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// t0 is the instant the tests freeze the server's clock at (and set the
// clients' clocks to): a multiple of 86400 s, so that fixed windows of a
// second, a minute and a day all start there.
var t0 = time.Unix(1_700_006_400, 0)

// realServer is one cellserver process on 127.0.0.1.
type realServer struct {
	t    testing.TB
	Port int
	cmd  *exec.Cmd
	done chan struct{}
}

// startReal starts cellserver on a free port, with DEBUG enabled and its
// clock frozen at t0, and stops it when the test ends.
func startReal(t testing.TB) *realServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &realServer{t: t, Port: ln.Addr().(*net.TCPAddr).Port}
	ln.Close()
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Addr returns host:port.
func (s *realServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// Start runs the server (again) on its port and waits for it to be ready,
// then freezes its clock at t0.
func (s *realServer) Start() {
	s.t.Helper()
	cmd := exec.Command(serverBin, "--bind", "127.0.0.1", "--port", fmt.Sprint(s.Port),
		"--enable-debug-command", "yes", "--loglevel", "notice")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); pw.Close(); close(s.done) }()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		found := false
		for sc.Scan() {
			if !found && strings.Contains(sc.Text(), "Ready to accept connections") {
				found = true
				ready <- true
			}
		}
		if !found {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			s.t.Fatal("cellserver exited before it was ready")
		}
	case <-time.After(10 * time.Second):
		s.t.Fatal("cellserver did not start")
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	if err := rdb.Do(context.Background(), "DEBUG", "CLOCK", "SET", t0.UnixNano()).Err(); err != nil {
		s.t.Fatal(err)
	}
}

// Stop kills the server and waits for it to exit. Stopping a stopped
// server does nothing.
func (s *realServer) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
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
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

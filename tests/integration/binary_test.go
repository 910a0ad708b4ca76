package integration

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// buildBinary builds cmd/cellserver into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "cellserver")
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/cellserver")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freePort returns a port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestBinary runs the cellserver binary as an operator would (docs/commands.md#settings):
// flags and a config file with redis.conf's names, DEBUG off by default,
// bad settings refused at start, SIGTERM a clean exit.
func TestBinary(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)

	t.Run("bad settings", func(t *testing.T) {
		for _, args := range [][]string{
			{"--port", "99999"},
			{"--nosuch", "1"},
			{"--maxclients", "0"},
			{"--shards", "3"},
			{"--loglevel", "loud"},
			{"--port"},
			{filepath.Join(t.TempDir(), "missing.conf")},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			cancel()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Errorf("%q: got %v, want a non-zero exit", args, err)
			}
			if !strings.HasPrefix(stderr.String(), "cellserver: ") {
				t.Errorf("%q: stderr %q, want a clear message", args, stderr.String())
			}
		}
	})

	t.Run("config file, flags and SIGTERM", func(t *testing.T) {
		port := freePort(t)
		conf := filepath.Join(t.TempDir(), "cellserver.conf")
		text := "# a comment\nport 1\nrequirepass \"s3cret\"\nenable-debug-command yes\nmaxclients 50\n"
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd := exec.Command(bin, conf, "--port", strconv.Itoa(port), "--loglevel", "notice")
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
			}
		})
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		waitFor(t, "the binary to listen", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		rc := dialRaw(t, addr)
		rc.wantDo(respErr(noAuth), "PING")
		rc.wantDo("+OK\r\n", "AUTH", "s3cret")
		rc.wantDo("+OK\r\n", "DEBUG", "CLOCK", "SET", strconv.FormatInt(t0, 10))
		rc.wantDo(respInts(0, 16, 15, -1, 2), "CL.THROTTLE", "user123", "15", "30", "60")
		rc.wantDo("*2\r\n"+respBulk("maxclients")+respBulk("50")+"", "CONFIG", "GET", "maxclients")

		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v\nstderr:\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no exit 30 s after SIGTERM")
		}
		rc.wantClosed()
	})

	t.Run("DEBUG off by default", func(t *testing.T) {
		port := freePort(t)
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--loglevel", "warning")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGINT)
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("exit after SIGINT: %v", err)
				}
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Errorf("no exit 30 s after SIGINT")
			}
		}()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		waitFor(t, "the binary to listen", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		rc := dialRaw(t, addr)
		rc.wantDo(respErr("ERR unknown command 'DEBUG', with args beginning with: 'CLOCK' 'GET' "), "DEBUG", "CLOCK", "GET")
		rc.wantDo("+PONG\r\n", "PING")
	})
}

// process is one cellserver binary running.
type process struct {
	cmd    *exec.Cmd
	addr   string
	exited chan error
	stderr *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for a process's writes and a test's
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitLog waits, bounded, until the process's log holds want, and fails
// the test with the log if it does not. A line the server logs before it
// replies can still reach the test after the reply: the log comes through
// a pipe that os/exec copies on a goroutine of its own.
func (p *process) waitLog(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for !strings.Contains(p.stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Errorf("log lacks %q:\n%s", want, p.stderr.String())
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startBinary starts bin with args, DEBUG CLOCK on and frozen at clock
// from the start (before any restore), and waits until it has loaded its
// keys, if any.
func startBinary(t *testing.T, clock int64, bin string, args ...string) *process {
	t.Helper()
	port := freePort(t)
	all := append([]string{"--port", strconv.Itoa(port), "--enable-debug-command", "yes",
		"--debug-clock-start", strconv.FormatInt(clock, 10), "--loglevel", "verbose"}, args...)
	p := &process{cmd: exec.Command(bin, all...), addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		exited: make(chan error, 1), stderr: &syncBuffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { p.kill(t) })
	waitFor(t, "the binary to load its keys", func() bool {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		rdb := redis.NewClient(&redis.Options{Addr: p.addr, Protocol: 2})
		defer rdb.Close()
		info, err := rdb.Info(context.Background(), "persistence").Result()
		return err == nil && strings.Contains(info, "loading:0\r\n")
	})
	return p
}

// kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *process) kill(t *testing.T) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not end after SIGKILL")
	}
}
